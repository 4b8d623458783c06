"""A simulated host's dcgm-exporter page (`:9400/metrics`): NVIDIA's exporter of DCGM fields,
for a Prometheus that scrapes the GPUs instead of specops asking nvidia-smi over SSH.

The shape is dcgm-exporter 3.x's (default-counters.csv help texts; `pci_bus_id` since 3.3.6;
`Hostname` the node's name): one gauge per field, one series per GPU, the text exposition
format only. The readings are the simulated nvidia-smi's (console/sim/gpus.py), so both
sources agree; `DCGM_FI_DEV_XID_ERRORS` is the last Xid code of each GPU (0: none), with
its `err_code` label, as the exporter reports the driver's errors.
"""

from __future__ import annotations

from collections.abc import Mapping

from console.sim.gpus import Load, Phase, reading

TEXT = "text/plain; version=0.0.4; charset=utf-8"

FIELDS = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "clocks.current.sm"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temperature.gpu"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power.draw"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "utilization.gpu"),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "memory.free"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "memory.used"),
)
"""(metric, help, the nvidia-smi field it reads) for the fields specops uses."""
XID_HELP = "Value of the last XID error encountered."


def page(host: str, names: list[str], phase: Phase, load: Load, xids: Mapping[int, int]) -> str:
    """The exporter's page for GPUs `names` on `host`; `xids`: the last Xid code by GPU."""
    readings = [reading(name, index, phase, load) for index, name in enumerate(names)]

    def labels(r: Mapping[str, str], extra: str = "") -> str:
        return (
            f'gpu="{r["index"]}",UUID="{r["uuid"]}",pci_bus_id="{r["pci.bus_id"]}",'
            f'device="nvidia{r["index"]}",modelName="{r["name"]}",Hostname="{host}"{extra}'
        )

    lines: list[str] = []
    for metric, help_text, field in FIELDS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        lines += [f"{metric}{{{labels(r)}}} {r[field]}" for r in readings]
    lines += ["# HELP DCGM_FI_DEV_XID_ERRORS " + XID_HELP, "# TYPE DCGM_FI_DEV_XID_ERRORS gauge"]
    for r in readings:
        code = xids.get(int(r["index"]), 0)
        extra = f',err_code="{code}"'
        lines.append(f"DCGM_FI_DEV_XID_ERRORS{{{labels(r, extra)}}} {code}")
    return "\n".join(lines) + "\n"
