"""`specops demo` keeps everything it writes in its own directory, never in the operator's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from textual.message import Message
from textual.notifications import Notify

from console.cli.demo import demo_state
from console.cli.tui import build_app
from console.sim.fleet import SimFleet
from console.sim.sglang import Timing
from tests.ui.support import until
from widgets.flag_editor import FlagEditorScreen
from widgets.messages import SnapshotFinished
from widgets.rollout_view import RolloutScreen


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` with its content's hash (directories as entries too)."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        found[rel] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return found


def seed_operator_files(home: Path) -> tuple[Path, Path]:
    """A real operator's config and state, with a real `b300` (the demo's first host name)."""
    config = home / ".config" / "specops"
    state = home / ".local" / "state" / "specops"
    (config / "profiles").mkdir(parents=True)
    (config / "settings.toml").write_text('theme = "textual-dark"\n')
    (config / "profiles" / "b300.toml").write_text('name = "b300"\n# the real one\n')
    (state / "last-good").mkdir(parents=True)
    (state / "last-good" / "b300.json").write_text(json.dumps({"host": "b300", "real": True}))
    (state / "audit.jsonl").write_text('{"host": "b300", "command": "systemctl show"}\n')
    return config, state


async def test_demo_flag_change_and_snapshot_leave_the_operators_dirs_untouched(
    tmp_path: Path, isolated_home: Path
) -> None:
    config, state = seed_operator_files(isolated_home)
    before = (tree(config), tree(state))
    demo_dir = tmp_path / "demo"
    sim = SimFleet(demo_dir, hosts=1, timing=Timing(load_s=0.3, decode_interval_s=0.3))
    messages: list[Message] = []
    with demo_state(demo_dir) as demo_state_dir:
        profiles = await sim.start()
        try:
            app = build_app(profiles, read_only=False)
            async with app.run_test(size=(140, 44), message_hook=messages.append) as pilot:
                await until(
                    pilot, lambda: "budget" in getattr(app.fleet.status.get("b300"), "flags", {})
                )
                await pilot.press("f")
                await until(pilot, lambda: isinstance(app.screen, FlagEditorScreen))
                editor = app.screen
                assert isinstance(editor, FlagEditorScreen)
                await pilot.press("enter", "backspace", "1", "6", "enter")
                await pilot.press("down", "down", "space", "d")  # cuda_graph off: 16 is safe
                await until(pilot, lambda: editor.plan is not None)
                await pilot.press("y")
                await until(pilot, lambda: isinstance(app.screen, RolloutScreen))
                view = app.screen
                assert isinstance(view, RolloutScreen)
                await until(pilot, lambda: view.result is not None, timeout=30)
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, RolloutScreen))
                await pilot.press("s")
                await until(
                    pilot, lambda: any(isinstance(m, SnapshotFinished) for m in messages), 30
                )
                await pilot.press("q")
        finally:
            await sim.stop()
    assert (tree(config), tree(state)) == before
    notes = [m.notification.message for m in messages if isinstance(m, Notify)]
    assert any("b300: applied" in n for n in notes), notes
    (cached,) = (demo_state_dir / "experiments" / "b300").glob("*.json")  # the ledger's copy
    saved = json.loads(cached.read_text())
    assert saved["after"]["flags"]["budget"] == 16 and saved["action"] == "set"
    audit = (demo_state_dir / "audit.jsonl").read_text().splitlines()
    assert any("systemctl restart" in line for line in audit)
    (action,) = [json.loads(line) for line in audit if '"kind": "action"' in line]
    assert action["intent"] == "budget 8 → 16, cuda_graph on → off"
    assert action["outcome"] == "applied" and "--disable-cuda-graph" in action["dropin"]
    assert action["action"] == "set"
    assert (demo_dir / "package" / "MANIFEST.sha256").is_file()
