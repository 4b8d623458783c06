"""Hosts from an Ansible inventory, with template profiles for everything Ansible does not know.

A team that already lists its GPU hosts in an Ansible inventory should not write a TOML
profile per host. `--inventory FILE` reads the inventory the way Ansible does, by running
`ansible-inventory -i FILE --list` (so ranges like `b300-[01:03]`, group vars, `host_vars/`,
YAML and INI all mean what they mean to Ansible), or reads a saved copy of that command's JSON.
The inventory gives each host its SSH coordinates and its groups; the service, journal, flags
and artifacts come from template profiles in the `--profiles` directory:

- `all.toml`: the fallback for every host;
- `GROUP.toml`: for the hosts of that group (and of its child groups), applied over `all.toml`
  in Ansible's order for group vars: shallower groups first, then by name;
- `HOST.toml`: one host, applied last.

Tables merge key by key (so a group can add one flag); arrays and values replace. A template
may leave out `name` and `[ssh] host`, and may set `[ssh]` defaults (`known_hosts`,
`identity_file`, …) that the inventory's variables override.

INI inventories give strings (`ansible_become=true` is `"true"`) where YAML gives booleans
and numbers: each variable is coerced here, and a value that means nothing stops the console
with an error naming the host, the variable and the value.

Past 500 lines because each Ansible variable it honours (address, port, user, key, proxy,
bastion) needs its reading and an error naming the variable and where it was set.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from console.hosts.profiles import NAME_RE, Profile, ProfileError, Unusable, format_validation

ANSIBLE_INVENTORY = "ansible-inventory"
INVENTORY_TIMEOUT_S = 120.0
FALLBACK_TEMPLATE = "all"
IMPLICIT_GROUPS = frozenset({"all", "ungrouped"})

# ansible.module_utils.parsing.convert_bool: BOOLEANS_TRUE / BOOLEANS_FALSE
_TRUE = frozenset({"y", "yes", "on", "1", "true", "t"})
_FALSE = frozenset({"n", "no", "off", "0", "false", "f"})


@dataclass(frozen=True)
class InventoryHost:
    name: str
    groups: tuple[str, ...]
    """Every group the host is in (its own and their parents), shallowest first, then by name."""
    variables: Mapping[str, Any]


def find_ansible_inventory() -> str | None:
    # The console script of ansible-core lands next to the interpreter that installed it,
    # which is not always on PATH (a virtualenv used without activating it).
    beside = Path(sys.executable).parent / ANSIBLE_INVENTORY
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(ANSIBLE_INVENTORY)


def _saved_listing(path: Path) -> dict[str, Any] | None:
    """The JSON of `ansible-inventory --list` when `path` holds one (it has `_meta`), else None."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read the inventory: {exc.strerror}") from None
    except UnicodeDecodeError:
        return None
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None  # a YAML inventory written in flow style; Ansible reads it
    return data if isinstance(data, dict) and "_meta" in data else None


def _run_ansible_inventory(path: Path, *extra: str) -> dict[str, Any]:
    program = find_ansible_inventory()
    if program is None:
        raise ProfileError(
            f"{path}: `{ANSIBLE_INVENTORY}` is not installed (pip install ansible-core), "
            f"or pass a saved copy of `{ANSIBLE_INVENTORY} -i {path} --list` as the inventory"
        )
    env = {
        **os.environ,
        # An inventory no plugin could parse is an error, not an empty fleet.
        "ANSIBLE_INVENTORY_UNPARSED_FAILED": "True",
        "ANSIBLE_NOCOLOR": "1",
    }
    argv = [program, "-i", str(path), "--list", *extra]
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=INVENTORY_TIMEOUT_S, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise ProfileError(
            f"{path}: {shlex.join(argv)} gave no answer in {INVENTORY_TIMEOUT_S:.0f}s"
        ) from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot run {program}: {exc.strerror}") from None
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()
        raise ProfileError(
            f"{path}: {shlex.join(argv)} failed (exit {result.returncode}): "
            + (" ".join(detail[-3:]) if detail else "no message")
        )
    try:
        data = json.loads(result.stdout)
    except ValueError as exc:
        raise ProfileError(f"{path}: {shlex.join(argv)} printed no JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: {shlex.join(argv)} printed no JSON object")
    return data


def read_inventory(path: Path) -> dict[str, Any]:
    """The inventory as `ansible-inventory --list` prints it (run here, or a saved copy)."""
    saved = _saved_listing(path)
    return saved if saved is not None else _run_ansible_inventory(path)


def _group_depths(data: Mapping[str, Any]) -> dict[str, int]:
    """Each group's depth below `all`, by its longest path, as Ansible orders group vars."""
    parents: dict[str, set[str]] = {}
    for group, body in data.items():
        if group == "_meta" or not isinstance(body, dict):
            continue
        parents.setdefault(group, set())
        for child in body.get("children", ()):
            parents.setdefault(child, set()).add(group)
    depths: dict[str, int] = {}

    def depth(group: str, seen: frozenset[str]) -> int:
        if group in depths:
            return depths[group]
        ups = parents.get(group, set()) - seen
        value = 1 + max((depth(p, seen | {group}) for p in ups), default=-1)
        depths[group] = value
        return value

    for group in parents:
        depth(group, frozenset())
    return depths


def inventory_hosts(data: Mapping[str, Any], source: Path) -> list[InventoryHost]:
    """Every host of the listing with its groups and variables, in the inventory's order."""
    meta = data.get("_meta")
    hostvars = meta.get("hostvars", {}) if isinstance(meta, dict) else {}
    parents: dict[str, set[str]] = {}
    direct: dict[str, list[str]] = {}
    order: list[str] = []
    for group, body in data.items():
        if group == "_meta" or not isinstance(body, dict):
            continue
        for child in body.get("children", ()):
            parents.setdefault(child, set()).add(group)
        for host in body.get("hosts", ()):
            if host not in direct:
                order.append(host)
            direct.setdefault(host, []).append(group)
    for host in hostvars:
        if host not in direct:
            order.append(host)
            direct[host] = []
    depths = _group_depths(data)
    hosts: list[InventoryHost] = []
    for name in order:
        if not NAME_RE.match(name):
            raise ProfileError(
                f"{source}: host {name!r}: the inventory name must be letters, digits, "
                "'.', '_' or '-' (up to 63) to name a specops host"
            )
        groups: set[str] = set()
        todo = list(direct[name])
        while todo:
            group = todo.pop()
            if group not in groups:
                groups.add(group)
                todo.extend(parents.get(group, ()))
        ordered = sorted(groups - IMPLICIT_GROUPS, key=lambda g: (depths.get(g, 0), g))
        variables = hostvars.get(name, {})
        if not isinstance(variables, dict):
            raise ProfileError(f"{source}: host {name!r}: its variables are not a mapping")
        hosts.append(InventoryHost(name, tuple(ordered), variables))
    if not hosts:
        raise ProfileError(f"{source}: the inventory lists no hosts")
    return hosts


class VariableError(ProfileError):
    """A host's inventory variable specops cannot use; `described(origin)` names where the
    inventory set it (`all.vars.`), once that is known."""

    def __init__(self, source: Path, host: str, variable: str, value: Any, why: str) -> None:
        self.source, self.host, self.variable = source, host, variable
        self.value, self.why = value, why
        super().__init__(self.described())

    def described(self, origin: str = "") -> str:
        return (
            f"{self.source}: host {self.host!r}: {origin}{self.variable} = {self.value!r}: "
            f"{self.why}"
        )


class _Vars:
    """One host's inventory variables, read with coercion and errors naming host and variable."""

    def __init__(self, source: Path, host: InventoryHost) -> None:
        self.source = source
        self.host = host
        self.overridden: set[str] = set()
        """SSH options in its variables that specops does not follow, on purpose."""

    def fail(self, name: str, value: Any, why: str) -> ProfileError:
        return VariableError(self.source, self.host.name, name, value, why)

    def get(self, *names: str) -> tuple[str, Any] | None:
        """The first of `names` that is set (Ansible's current name first, then legacy ones)."""
        for name in names:
            if self.host.variables.get(name) is not None:
                return name, self.host.variables[name]
        return None

    def string(self, *names: str) -> str | None:
        found = self.get(*names)
        if found is None:
            return None
        name, value = found
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.fail(name, value, "must be a string")
        text = str(value).strip()
        if not text or any(c.isspace() for c in text):
            raise self.fail(name, value, "must be non-empty and contain no whitespace")
        return text

    def port(self, *names: str) -> int | None:
        found = self.get(*names)
        if found is None:
            return None
        name, value = found
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or not 1 <= int(text) <= 65535:
            raise self.fail(name, value, "must be a TCP port (1-65535)")
        return int(text)

    def boolean(self, *names: str) -> bool | None:
        found = self.get(*names)
        if found is None:
            return None
        name, value = found
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, str | int) else ""
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise self.fail(name, value, "not a boolean (true/false, yes/no, on/off, 1/0)")


OVERRIDDEN = {
    "stricthostkeychecking": "StrictHostKeyChecking",
    "userknownhostsfile": "UserKnownHostsFile",
    "globalknownhostsfile": "GlobalKnownHostsFile",
}
"""Options an inventory may carry that specops overrides on purpose: host keys are always
checked against the profile's known_hosts. Said once per inventory, never silently."""

_SSH_FLAGS = frozenset("46ACNTqvx")
"""`ssh` switches that change nothing about where a `-W` proxy leads (quiet, no tty, …)."""


def proxy_command_jump(command: str) -> str:
    """`ssh -W %h:%p [-q] [-p PORT] [-l USER] [USER@]HOST[:PORT]` as the ProxyJump it means
    (`USER@HOST:PORT`); ValueError saying why for any other ProxyCommand (specops does not run
    a local command to reach a host)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"ProxyCommand is not a valid shell word list: {exc}") from None
    unsupported = (
        "only the `ssh -W %h:%p [USER@]BASTION` form of ProxyCommand is read (as ProxyJump)"
    )
    if not words or posixpath.basename(words[0]) != "ssh":
        raise ValueError(unsupported)
    forward = user = port = target = None
    i = 1
    while i < len(words):
        word = words[i]
        if word.startswith("-") and len(word) >= 2:
            flag, attached = word[1], word[2:]
            if flag in ("W", "p", "l"):
                if not attached:
                    i += 1
                    if i >= len(words):
                        raise ValueError(f"ProxyCommand: {word} needs a value")
                    attached = words[i]
                if flag == "W":
                    forward = attached
                elif flag == "p":
                    port = attached
                else:
                    user = attached
            elif flag == "o" or not set(word[1:]) <= _SSH_FLAGS:
                raise ValueError(f"{unsupported}; {word!r} is not read")
        elif target is None:
            target = word
        else:
            raise ValueError(f"{unsupported}; {word!r} follows the bastion")
        i += 1
    if forward != "%h:%p" or target is None:
        raise ValueError(unsupported)
    if "@" in target:
        user, _, target = target.rpartition("@")
    if target.count(":") == 1:
        target, _, port = target.partition(":")
    if not target or (port is not None and not port.isdigit()):
        raise ValueError(f"ProxyCommand: {command!r} names no usable bastion")
    return (f"{user}@" if user else "") + target + (f":{port}" if port else "")


def _proxy_jump(v: _Vars) -> str | None:
    """ProxyJump from `ansible_ssh_common_args` / `ansible_ssh_extra_args` (`-J` or `-o`)."""
    jump: str | None = None
    for name in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        value = v.host.variables.get(name)
        if value is None:
            continue
        try:
            words = shlex.split(str(value))
        except ValueError as exc:
            raise v.fail(name, value, f"not a valid shell word list: {exc}") from None
        options: list[str] = []
        i = 0
        while i < len(words):
            word = words[i]
            if word in ("-o", "-J") and i + 1 < len(words):
                options.append(("ProxyJump=" if word == "-J" else "") + words[i + 1])
                i += 2
                continue
            if word.startswith("-o") and len(word) > 2:
                options.append(word[2:])
            elif word.startswith("-J") and len(word) > 2:
                options.append("ProxyJump=" + word[2:])
            i += 1
        for option in options:
            key, sep, rest = option.partition("=")
            if not sep:
                key, _, rest = option.partition(" ")
            key = key.strip().lower()
            if key == "proxyjump":
                jump = rest.strip()
            elif key in OVERRIDDEN:
                v.overridden.add(f"{OVERRIDDEN[key]}={rest.strip()}")
            elif key == "proxycommand":
                try:
                    jump = proxy_command_jump(rest.strip())
                except ValueError as exc:
                    raise v.fail(name, value, str(exc)) from None
    if jump is not None and (not jump or any(c.isspace() for c in jump)):
        raise ProfileError(f"{v.source}: host {v.host.name!r}: ProxyJump {jump!r} is not valid")
    return jump or None


def ssh_from_inventory(
    source: Path, host: InventoryHost, overridden: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """The `[ssh]` keys this host's inventory variables set (absent ones are left out);
    options specops overrides go into `overridden` (option → hosts)."""
    v = _Vars(source, host)
    connection = v.string("ansible_connection")
    if connection is not None and connection not in ("ssh", "smart", "paramiko"):
        raise v.fail("ansible_connection", connection, "specops reaches hosts over SSH only")
    method = v.string("ansible_become_method")
    become = v.boolean("ansible_become")
    if become and method is not None and method != "sudo":
        raise v.fail("ansible_become_method", method, "specops becomes root with sudo only")
    found: dict[str, Any] = {
        "host": v.string("ansible_host", "ansible_ssh_host"),
        "port": v.port("ansible_port", "ansible_ssh_port"),
        "user": v.string("ansible_user", "ansible_ssh_user"),
        "identity_file": v.string("ansible_ssh_private_key_file", "ansible_private_key_file"),
        "proxy_jump": _proxy_jump(v),
        "sudo": become,
    }
    for option in sorted(v.overridden):
        if overridden is not None:
            overridden.setdefault(option, []).append(host.name)
    return {key: value for key, value in found.items() if value is not None}


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_templates(directory: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    if not directory.is_dir():
        raise ProfileError(f"{directory}: not a directory of template profiles")
    templates: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path in sorted(directory.glob("*.toml")):
        try:
            templates[path.stem] = (path, tomllib.loads(path.read_text(encoding="utf-8")))
        except OSError as exc:
            raise ProfileError(f"{path}: cannot read: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    return templates


class _TemplateError(ProfileError):
    """A template's own mistake: every host using it has it, so it stops the inventory."""


def _checked(
    source: Path, host: InventoryHost, profile: Profile, check: Callable[[Profile], None]
) -> None:
    """`check(profile)`, its refusal naming the inventory variable the value came from."""
    try:
        check(profile)
    except ProfileError as exc:
        variable = identity_variable(host)
        if variable is None:
            raise
        value = host.variables[variable]
        why = str(exc).split(": ", 2)[-1]  # after "profile NAME: field '…' = '…'"
        raise VariableError(source, host.name, variable, value, why) from None


def variable_origins(path: Path, hosts: Sequence[InventoryHost]) -> dict[str, dict[str, str]]:
    """Host → variable → where the inventory sets it (`all.vars.`, `gpu.vars.`; "" on the
    host's own line or in its host_vars), from `ansible-inventory --list --export`, which
    keeps group vars with their group. Empty for a saved listing (only merged values)."""
    if _saved_listing(path) is not None:
        return {}
    data = _run_ansible_inventory(path, "--export")
    meta = data.get("_meta")
    own = meta.get("hostvars") if isinstance(meta, dict) else None
    own = own if isinstance(own, dict) else {}
    origins: dict[str, dict[str, str]] = {}
    for host in hosts:
        found: dict[str, str] = {}
        for group in ("all", *host.groups):  # Ansible's order: the last one to set it wins
            entry = data.get(group)
            variables = entry.get("vars") if isinstance(entry, dict) else None
            for name in variables if isinstance(variables, dict) else {}:
                found[name] = f"{group}.vars."
        mine = own.get(host.name)
        for name in mine if isinstance(mine, dict) else {}:
            found[name] = ""
        origins[host.name] = found
    return origins


def _with_origins(
    path: Path, failures: list[tuple[InventoryHost, ProfileError]]
) -> list[tuple[InventoryHost, ProfileError]]:
    """The failures, each variable's named with the group that set it where one did."""
    if not any(isinstance(e, VariableError) for _, e in failures):
        return failures
    try:
        origins = variable_origins(path, [host for host, _ in failures])
    except ProfileError:  # the names stay unqualified; the errors themselves stand
        return failures
    named: list[tuple[InventoryHost, ProfileError]] = []
    for host, exc in failures:
        if isinstance(exc, VariableError):
            origin = origins.get(host.name, {}).get(exc.variable, "")
            exc = ProfileError(exc.described(origin))
        named.append((host, exc))
    return named


def profile_for(
    source: Path,
    host: InventoryHost,
    templates: Mapping[str, tuple[Path, dict[str, Any]]],
    overridden: dict[str, list[str]] | None = None,
) -> Profile:
    """The host's profile: its templates merged in order, then the inventory's SSH variables."""
    chain = [FALLBACK_TEMPLATE, *host.groups, host.name]
    used = [templates[name] for name in chain if name in templates]
    if not used:
        raise _TemplateError(
            f"{source}: host {host.name!r}: no template profile for it; add one of "
            + ", ".join(f"{name}.toml" for name in reversed(chain))
        )
    data: dict[str, Any] = {}
    for path, template in used:
        named = template.get("name")
        if named is not None and named != host.name:
            raise _TemplateError(
                f"{path}: field 'name' = {named!r}: a template must leave out 'name' "
                f"(it is the inventory's host name, here {host.name!r})"
            )
        data = _merge(data, template)
    ssh = dict(data.get("ssh") or {})
    ssh.setdefault("host", host.name)  # Ansible connects to the inventory name by default
    ssh.update(ssh_from_inventory(source, host, overridden))
    data.update(name=host.name, ssh=ssh, groups=list(host.groups))
    label = f"{source} host {host.name} (templates {', '.join(str(p.name) for p, _ in used)})"
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ProfileError(format_validation(Path(label), exc)) from None


IDENTITY_VARIABLES = ("ansible_ssh_private_key_file", "ansible_private_key_file")


def identity_variable(host: InventoryHost) -> str | None:
    """The inventory variable that names the host's key file, when one does."""
    return next((n for n in IDENTITY_VARIABLES if host.variables.get(n) is not None), None)


def load_inventory_fleet(
    inventory: Path,
    templates_dir: Path,
    notices: list[str] | None = None,
    unusable: list[Unusable] | None = None,
    check: Callable[[Profile], None] | None = None,
) -> list[Profile]:
    """Every host of the inventory as a profile, in the inventory's order; `notices` gets one
    line per SSH option of the inventory that specops overrides on purpose.

    With `unusable`, a host whose variables specops cannot use (or that `check` refuses: a key
    file that is not there) goes there with the reason and the others load; a problem of the
    templates themselves, or every host unusable, is still an error for the whole inventory."""
    hosts = inventory_hosts(read_inventory(inventory), inventory)
    templates = _read_templates(templates_dir)
    known = {FALLBACK_TEMPLATE} | {h.name for h in hosts} | {g for h in hosts for g in h.groups}
    stray = [path for name, (path, _) in templates.items() if name not in known]
    if stray:
        raise ProfileError(
            f"{stray[0]}: names no group or host of {inventory} (templates are all.toml, "
            "GROUP.toml or HOST.toml)"
        )
    # Host names are unique: they are the keys of the listing's hostvars and group host lists.
    overridden: dict[str, list[str]] = {}
    profiles: list[Profile] = []
    failures: list[tuple[InventoryHost, ProfileError]] = []
    for host in hosts:
        try:
            profile = profile_for(inventory, host, templates, overridden)
            if check is not None:
                _checked(inventory, host, profile, check)
        except _TemplateError:
            raise
        except ProfileError as exc:
            if unusable is None:
                raise
            failures.append((host, exc))
            continue
        profiles.append(profile)
    if failures:
        failures = _with_origins(inventory, failures)
    if failures and not profiles:
        raise failures[0][1]
    if unusable is not None:
        unusable.extend(Unusable(h.name, str(e), h.groups) for h, e in failures)
    for option, names in overridden.items():
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        if notices is not None:
            notices.append(
                f"{inventory}: {option} ({shown}) is not followed: specops always checks "
                "host keys against the profile's known_hosts (`specops trust HOST` enrols one)"
            )
    return profiles
