"""House rules that CI enforces: the core never loads Textual; ruff, mypy and import-linter pass.

The module list is never kept by hand: `core_modules()` walks the package, so a module added
anywhere in console/ is checked the day it lands. The contracts in pyproject.toml are stated
over packages; `test_contracts_name_every_top_level_module` makes a new top-level module fail
until it is placed in both. `test_a_planted_textual_import_fails_both_guards` proves the two
guards can fail at all.
"""

from __future__ import annotations

import ast
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import console

REPO = Path(__file__).resolve().parents[2]

UI_SHELL = ("console.app", "console.ui")
"""The app shell: the only code in console/ that imports Textual (with widgets/)."""


def _in_shell(name: str) -> bool:
    return any(name == m or name.startswith(f"{m}.") for m in UI_SHELL)


def core_modules(root: Path = REPO) -> list[str]:
    """Every module of console/ but the app shell's, found by walking the package."""
    names = ["console"]
    for info in pkgutil.walk_packages([str(root / "console")], prefix="console."):
        names.append(info.name)
    # `__main__` runs the CLI when imported; its one import (console.cli) is in the list.
    return sorted(n for n in names if not _in_shell(n) and n != "console.__main__")


def _loaded_ui(root: Path, modules: list[str]) -> list[str]:
    """Import `modules` in a fresh interpreter rooted at `root`; the UI modules that came along."""
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')\n"
        "             or m == 'widgets' or m.startswith('widgets.') or m == 'console.app'\n"
        "             or m == 'console.ui' or m.startswith('console.ui.'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    return [m for m in result.stdout.strip().split(",") if m]


def test_the_walk_finds_the_rooms() -> None:
    found = core_modules()
    for name in ("console.transport.ssh", "console.service.unit", "console.cli.demo"):
        assert name in found
    assert not any(_in_shell(name) for name in found)


def test_importing_the_core_loads_no_textual() -> None:
    assert _loaded_ui(REPO, core_modules()) == []


def test_a_headless_command_loads_no_textual_widgets_or_simulator() -> None:
    """`python -X importtime -m console status --help` lists every module the command loads."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "console", "status", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "console.cli.status" in loaded  # the measurement itself works
    unwanted = sorted(
        m
        for m in loaded
        if m.split(".")[0] in ("textual", "widgets") or m.startswith("console.sim") or _in_shell(m)
    )
    assert unwanted == []


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def test_contracts_name_every_top_level_module() -> None:
    children = {f"console.{info.name}" for info in pkgutil.iter_modules(console.__path__)} | {
        "console.__main__"
    }
    by_type = {c["type"]: c for c in _contracts()}
    (forbidden,) = [c for c in _contracts() if c["name"] == CORE_CONTRACT]
    layers = by_type["layers"]
    assert "acyclic_siblings" in by_type
    assert forbidden["allow_indirect_imports"] is False
    sources = set(forbidden["source_modules"])  # type: ignore[call-overload]
    assert sources == children - set(UI_SHELL), "add the new module to the forbidden contract"
    layered = {
        name.strip()
        for layer in layers["layers"]  # type: ignore[attr-defined]
        for name in layer.replace(":", "|").split("|")
    }
    assert children <= layered, f"place {sorted(children - layered)} in the layers contract"


CORE_CONTRACT = "The domain core is reachable without the TUI"


def _layers() -> list[list[str]]:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    return [[r.strip() for r in layer.split("|")] for layer in layers["layers"]]  # type: ignore[attr-defined]


def arrows() -> dict[str, list[str]]:
    """Each room and the rooms it imports (annotations aside), in the layers' order."""
    import grimp

    rooms = [r for level in _layers() for r in level]
    graph = grimp.build_graph("console", "widgets", exclude_type_checking_imports=True)
    return {
        a: [
            b
            for b in rooms
            if b != a and graph.direct_import_exists(importer=a, imported=b, as_packages=True)
        ]
        for a in rooms
    }


def test_the_contracts_allow_exactly_the_arrows_the_code_has() -> None:
    """Issue 40: the layers allow every room below; the forbidden contracts take back each
    pair no code uses, so what is allowed is what is drawn in docs/architecture.md."""
    used = arrows()
    levels = _layers()
    expected: dict[str, list[str]] = {}
    for i, level in enumerate(levels):
        below = [r for later in levels[i + 1 :] for r in later]
        for room in level:
            if unused := [r for r in below if r not in used[room]]:
                expected[room] = unused
    stated = {
        c["source_modules"][0]: list(c["forbidden_modules"])  # type: ignore[index, call-overload]
        for c in _contracts()
        if c["type"] == "forbidden" and c["name"] != CORE_CONTRACT
    }
    assert stated == expected, "regenerate the arrows' contracts in pyproject.toml"
    drawn = (REPO / "docs" / "architecture.md").read_text()
    for room, imported in used.items():
        line = f"{room.removeprefix('console.')} → " + (
            ", ".join(r.removeprefix("console.") for r in imported) or "(nothing)"
        )
        assert line in drawn, f"docs/architecture.md lacks the arrows line {line!r}"


def _tool(name: str) -> list[str]:
    exe = shutil.which(name)
    if exe is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return [exe]


def test_a_planted_textual_import_fails_both_guards(tmp_path: Path) -> None:
    """Copy the tree, add `import textual` to a core module, and see both guards refuse it."""
    copy = tmp_path / "tree"
    ignore = shutil.ignore_patterns("__pycache__", ".git", ".mypy_cache", "*.egg-info")
    for part in ("console", "widgets"):
        shutil.copytree(REPO / part, copy / part, ignore=ignore)
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    planted = copy / "console" / "package" / "digests.py"
    planted.write_text(planted.read_text() + "\nimport textual  # planted\n")

    assert _loaded_ui(copy, core_modules(copy)) != []
    # lint-imports analyses the packages it imports: point it at the copy, not the install.
    result = subprocess.run(
        _tool("lint-imports"),
        cwd=copy,
        capture_output=True,
        text=True,
        env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(copy)},
    )
    assert result.returncode != 0
    assert "console.package.digests -> textual" in result.stdout


def test_ruff_clean() -> None:
    result = subprocess.run(
        [*_tool("ruff"), "check", "."], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)  # a fresh clone has no mypy cache: minutes on one shared core
def test_mypy_clean() -> None:
    result = subprocess.run(_tool("mypy"), cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contracts() -> None:
    result = subprocess.run(_tool("lint-imports"), cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def _rooms(root: Path = REPO) -> list[Path]:
    """Every package directory of console/ and widgets/: the rooms a newcomer walks into."""
    return sorted(
        init.parent
        for part in ("console", "widgets")
        for init in (root / part).rglob("__init__.py")
    )


def _unnamed_modules(room: Path) -> list[str]:
    """The modules of `room` its docstring does not name (as `name.py`)."""
    doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text())) or ""
    return sorted(
        p.name for p in room.glob("*.py") if p.name != "__init__.py" and p.name not in doc
    )


def test_every_room_names_each_of_its_modules() -> None:
    missing = {
        str(room.relative_to(REPO)): names for room in _rooms() if (names := _unnamed_modules(room))
    }
    assert missing == {}, "say in the room's __init__ docstring what each module holds"


def test_a_module_missing_from_its_room_docstring_is_found(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "__init__.py").write_text('"""A room.\n\n- `kept.py`: it is named.\n"""\n')
    (room / "kept.py").write_text("")
    (room / "forgotten.py").write_text("")
    assert _unnamed_modules(room) == ["forgotten.py"]


LONG = 500
"""Lines past which a module says in its docstring why it is one module (issue 40)."""


def _long_without_why(paths: list[Path]) -> list[str]:
    """Modules over LONG lines whose docstring lacks `Past 500 lines because …`."""
    return sorted(
        str(p)
        for p in paths
        if len(p.read_text().splitlines()) > LONG
        and "Past 500 lines because" not in (ast.get_docstring(ast.parse(p.read_text())) or "")
    )


def test_a_long_module_says_why_it_is_one() -> None:
    paths = [p for d in ("console", "widgets") for p in (REPO / d).rglob("*.py")]
    found = _long_without_why(paths)
    assert [str(Path(p).relative_to(REPO)) for p in found] == []


def test_a_long_module_without_its_reason_is_found(tmp_path: Path) -> None:
    long = "\n".join(["x = 1"] * (LONG + 1))
    (tmp_path / "said.py").write_text(f'"""Big.\n\nPast 500 lines because it is.\n"""\n{long}\n')
    (tmp_path / "silent.py").write_text(f'"""Big."""\n{long}\n')
    (tmp_path / "short.py").write_text('"""Small."""\n')
    assert _long_without_why(sorted(tmp_path.glob("*.py"))) == [str(tmp_path / "silent.py")]


PLANTED = [
    ("widgets/planted.py", "console.sim", "widgets is not allowed to import console.sim"),
    ("console/watch/planted.py", "textual", "console.watch is not allowed to import textual"),
]


@pytest.mark.parametrize(("module", "imported", "broken"), PLANTED)
def test_the_contracts_forbid_what_no_code_does(
    tmp_path: Path, module: str, imported: str, broken: str
) -> None:
    """A planted import the layers forbid (the simulator from a widget, Textual from the
    domain) fails lint-imports in a copy of the tree: the contracts are not decoration."""
    for part in ("console", "widgets"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / module).write_text(f"import {imported}\n")
    result = subprocess.run(_tool("lint-imports"), cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode != 0
    assert broken in result.stdout
