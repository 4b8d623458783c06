"""Which GPUs a host has, as `nvidia-smi` names them: `8× NVIDIA H100 80GB HBM3`.

Cells of one campaign split over hosts, and one change rolled out to a group, are only
compared or made alike when the hosts are: the same SGLang release *and* the same GPUs. The
model is asked of the host itself (`nvidia-smi --query-gpu=name --format=csv,noheader`, one
line per GPU in index order, as the reference H100 answers). A host without `nvidia-smi`
(or where it fails: no driver loaded) reads as None, "unknown", never as an error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from console.transport import remote
from console.transport.ssh import HostSession


def model_of(names: list[str]) -> str | None:
    """`8× NVIDIA H100 80GB HBM3` (`A + B` for mixed cards, in index order); None for none."""
    counts = Counter(n for n in names if n)
    if not counts:
        return None
    return " + ".join(f"{count}× {name}" for name, count in counts.items())


async def read_gpu_model(session: HostSession) -> str | None:
    """The host's GPUs by name and count; None when it cannot say."""
    result = await session.run(remote.gpu_names(), timeout=30, check=False)
    if result.returncode != 0:
        return None
    return model_of([line.strip() for line in result.stdout.splitlines()])


def unlike(models: Mapping[str, str | None]) -> str | None:
    """`b300 8× …, b300-2 4× …` when the hosts that said differ; None when they are alike
    (hosts that could not say are left out: there is nothing to compare)."""
    known = {host: model for host, model in models.items() if model is not None}
    if len(set(known.values())) <= 1:
        return None
    return ", ".join(f"{host} {model}" for host, model in known.items())
