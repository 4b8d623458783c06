"""Which SGLang release a unit runs, asked of the unit's own interpreter.

Flags, log formats and `/health` all differ by release, and a host's venv is what decides it,
not what the profile says: `ExecStart`'s argv[0] is asked `import sglang;
print(sglang.__version__)` (`remote.sglang_version`). A host that cannot answer (no sglang in
that interpreter, a wrapper script) reads as None, and callers fall back to the build's
`--help` alone.
"""

from __future__ import annotations

from console.service.catalogue import release_key
from console.transport import remote
from console.transport.ssh import HostSession


async def read_version(session: HostSession, interpreter: str) -> str | None:
    """`sglang.__version__` as the unit's interpreter reports it; None when it cannot say."""
    try:
        command = remote.sglang_version(interpreter)
    except remote.UnsafeArgument:
        return None
    result = await session.run(command, timeout=60, check=False)
    if result.returncode != 0:
        return None
    lines = result.stdout.strip().splitlines()
    version = lines[-1].strip() if lines else ""
    return version if release_key(version) is not None else None
