"""`c` shows the selected host's ledger: configurations with status and numbers, the newest
change's before and after side by side, and a rolled-back configuration never as best."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console
from textual.widgets import Static

from console.app import SpecopsApp
from console.fleet.fleet import Fleet
from console.hosts.profiles import load_fleet
from console.ledger.ledger import Experiment, Side, WindowStats, host_dir, save, text_of
from console.transport.host_files import STATE_ROOT
from tests.ui.support import simulated_fleet, until
from widgets.compare_view import CompareScreen


def _side(inv: str, flags: Mapping[str, object], accept: list[float], tput: list[float]) -> Side:
    windows = {"accept_len": WindowStats.of(accept), "gen_throughput": WindowStats.of(tput)}
    return Side(inv, flags, {k: v for k, v in windows.items() if v is not None})


async def test_c_shows_the_ledger_side_by_side(tmp_path: Path) -> None:
    b8 = {"budget": 8, "cuda_graph": True}
    b16 = {"budget": 16, "cuda_graph": False}
    b24 = {"budget": 24, "cuda_graph": True}
    kept = Experiment(
        "b300", "u", "2026-12-03T10:00:00+00:00", "2026-12-03T10:05:00+00:00", "kept",
        _side("a" * 32, b8, [4.36, 4.41, 4.38, 4.44], [1650.0, 1610.0, 1660.0, 1640.0]),
        _side("b" * 32, b16, [5.6, 6.1, 5.9, 6.3], [820.0, 800.0, 830.0, 815.0]),
    )  # fmt: skip
    crashed = Experiment(
        "b300", "u", "2026-12-03T11:00:00+00:00", "2026-12-03T11:01:00+00:00", "rolled_back",
        _side("b" * 32, b16, [5.9], [818.0]), Side("c" * 32, b24),
        signature="illegal_memory_access", phase="CUDA graph capture",
    )  # fmt: skip
    b4 = {"budget": 4, "cuda_graph": True}  # in this console's cache only: never on the host
    save(
        Experiment(
            "b300", "u", "2026-12-01T00:00:00+00:00", "", "kept", Side(None, b4), Side(None, b8)
        )
    )
    async with simulated_fleet(tmp_path, hosts=1, decode_interval_s=0.2) as sim:
        ledger = sim.hosts["b300"].local(host_dir("sglang-k26-ddtree.service", STATE_ROOT))
        ledger.mkdir(parents=True)
        for experiment in (kept, crashed):  # on the host, as another console left them
            (ledger / experiment.file_name()).write_text(text_of(experiment))
        app = SpecopsApp(Fleet(load_fleet(sim.profiles_dir)))
        async with app.run_test(size=(160, 44)) as pilot:
            await until(pilot, lambda: app.fleet.status.get("b300") is not None)
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, CompareScreen))
            screen = app.screen
            assert isinstance(screen, CompareScreen)
            view = screen
            await until(pilot, lambda: view.loaded)
            text = body(screen)
            assert "rolled back: illegal_memory_access during CUDA graph capture" in text
            assert "beyond spread" in text and "(n=4)" in text
            assert "best: #1 budget=8 cuda_graph=on" in text
            assert "read from the host's ledger (/var/lib/specops/" in text
            assert "budget=4" not in text  # the host's ledger, not the cache
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, CompareScreen))

            # The host gone: the console's cache, said so.
            await sim.hosts["b300"].go_offline()
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, CompareScreen))
            screen = app.screen
            assert isinstance(screen, CompareScreen)
            gone = screen
            await until(pilot, lambda: gone.loaded, timeout=30)
            text = body(screen)
            assert "read from the console's cached copy of its ledger" in text
            assert "budget=4" in text and "illegal_memory_access" in text  # cached when read


def body(screen: CompareScreen) -> str:
    console = Console(width=150, record=True, file=io.StringIO())
    console.print(screen.query_one("#compare-body", Static).content)
    return console.export_text()
