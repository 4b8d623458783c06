"""Regenerate `console/service/sglang_catalogue.json`, SGLang's launch flags per release.

Not run in CI: it needs the released wheels (`pip download sglang==X --no-deps -d wheels/`).
Two steps, because reading a release's flags means running that release's own argparse code:

    # 1. per release, with that release importable (a venv with the wheel and its deps, or the
    #    unzipped wheel with its third-party imports stubbed), dump its parser:
    python -m tools.sglang_catalogue dump SRC_DIR dumps/0.5.23.json
    # 2. merge the dumps (named <release>.json) into the catalogue the console ships:
    python -m tools.sglang_catalogue build dumps/*.json -o console/service/sglang_catalogue.json

`dump` calls `ServerArgs.add_cli_args` exactly as `python -m sglang.launch_server` does and
records every option: its spellings, whether it takes a value, its choices, and for SGLang's
`Deprecated*Action`s the replacement they name (`new_flag`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def dump(src: Path, out: Path) -> int:
    """Write the argparse actions of the release whose `sglang/` package is under `src`."""
    sys.path.insert(0, str(src))
    from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    actions = []
    for action in parser._actions:
        if not action.option_strings:
            continue
        actions.append(
            {
                "option_strings": list(action.option_strings),
                "dest": action.dest,
                "action": type(action).__name__,
                "nargs": action.nargs if isinstance(action.nargs, int | str | None) else None,
                "choices": None if action.choices is None else [str(c) for c in action.choices],
                "extra": {"new_flag": getattr(action, "new_flag", None)},
            }
        )
    out.write_text(json.dumps({"allow_abbrev": parser.allow_abbrev, "actions": actions}))
    return 0


def _option(action: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"dest": action["dest"]}
    if action.get("nargs") == 0:
        entry["switch"] = True
    if action.get("choices"):
        entry["choices"] = [str(c) for c in action["choices"]]
    new_flag = (action.get("extra") or {}).get("new_flag")
    if new_flag or "Deprecated" in action.get("action", ""):
        entry["deprecated"] = new_flag or ""
    return entry


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def build(dumps: list[Path], out: Path) -> int:
    """Merge `<release>.json` dumps into the catalogue, oldest release first."""
    releases: dict[str, Any] = {}
    for path in sorted(dumps, key=lambda p: _release_key(p.stem)):
        data = json.loads(path.read_text())
        if data.get("error"):
            print(f"{path}: the dump failed, skipped", file=sys.stderr)
            continue
        options: dict[str, Any] = {}
        for action in data["actions"]:
            if "--help" in action["option_strings"]:
                continue
            for spelling in action["option_strings"]:
                if spelling.startswith("--"):
                    options[spelling] = _option(action)
        releases[path.stem] = {
            "allow_abbrev": bool(data.get("allow_abbrev", True)),
            "options": dict(sorted(options.items())),
        }
    catalogue = {
        "about": "SGLang launch flags per release; regenerate with tools/sglang_catalogue.py",
        "releases": releases,
    }
    out.write_text(json.dumps(catalogue, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"{out}: {len(releases)} releases", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.sglang_catalogue")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="dump one release's argparse parser")
    d.add_argument("src", type=Path, help="directory holding that release's sglang/ package")
    d.add_argument("out", type=Path)
    b = sub.add_parser("build", help="merge dumps named <release>.json into the catalogue")
    b.add_argument("dumps", type=Path, nargs="+")
    b.add_argument("-o", "--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "dump":
        return dump(args.src, args.out)
    return build(args.dumps, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
