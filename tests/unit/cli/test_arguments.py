"""Words in the order a person types them: `specops sweep HOST --yes budget=4,8` is the same
campaign as `specops sweep HOST budget=4,8 --yes` (argparse alone refused the first)."""

from __future__ import annotations

import pytest

from console.cli import parse_args


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "b300", "budget=4,8", "cuda_graph=on,off", "--yes"],
        ["sweep", "b300", "--yes", "budget=4,8", "cuda_graph=on,off"],
        ["sweep", "b300", "budget=4,8", "--yes", "cuda_graph=on,off"],
    ],
)
def test_the_grid_may_come_before_or_after_the_options(argv: list[str]) -> None:
    args = parse_args(argv)
    assert args.axes == ["budget=4,8", "cuda_graph=on,off"] and args.yes


def test_a_stray_word_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(["sweep", "b300", "--yes", "--bogus"])
    assert exited.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["status", "b300", "--bogus"])
