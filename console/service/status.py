"""`read_status`: systemd's view of a unit and the flag values its effective ExecStart carries.

Everything that needs to know what a host runs (the fleet's polls, `specops status`, `set`,
snapshots) reads it here, so none of them has to import the fleet for it.
"""

from __future__ import annotations

from console.hosts.events import ServiceStatus
from console.service.flags import read_flags
from console.service.unit import effective_service
from console.service.version import read_version
from console.transport import remote
from console.transport.ssh import HostSession


async def read_status(
    session: HostSession, with_flags: bool = True, with_version: bool = False
) -> ServiceStatus:
    """systemd's view of the unit and the flag values of its effective ExecStart.

    `with_version` also asks the unit's interpreter for its SGLang release (an `import
    sglang`, seconds on a real host: once per invocation, not per poll).
    """
    profile = session.profile
    unit = profile.service.unit
    result = await session.run(remote.systemctl_show(unit), timeout=20)
    props = remote.parse_show(result.stdout)
    flags = {}
    version = None
    if with_flags or with_version:
        cat = await session.run(remote.systemctl_cat(unit), timeout=20)
        service = effective_service(cat.stdout)
        if with_flags:
            # Secret values never leave the process unmasked (status, the TUI, alerts).
            flags = profile.masked(read_flags(profile.flags, service.argv, service.environment))
        if with_version and service.argv:
            version = await read_version(session, service.argv[0])
    return ServiceStatus(
        host=session.name,
        active_state=props.get("ActiveState", "unknown"),
        sub_state=props.get("SubState", "unknown"),
        result=props.get("Result", ""),
        invocation_id=props.get("InvocationID", ""),
        n_restarts=int(props.get("NRestarts", "0") or 0),
        need_daemon_reload=props.get("NeedDaemonReload") == "yes",
        flags=flags,
        sglang_version=version,
    )
