"""A simulated host's SGLang HTTP port (and its dcgm-exporter) on 127.0.0.1 of this machine,
for a scraper that is not on the host.

The simulated hosts answer HTTP only inside their SSH connections (the console reaches the
server through a direct TCP channel, as on a real fleet). A Prometheus scrapes its targets
itself, so a test that runs a real Prometheus against simulated hosts serves each host's port
here, on loopback only. Requests go to whatever server the host's unit runs at the time (a
restarted server is a new one); with none running the answer is 503, which a scraper counts
as down.
"""

from __future__ import annotations

import asyncio

from console.sim import dcgm
from console.sim.gpus import Load, Phase
from console.sim.host import SimHost
from console.sim.http import TextPage, serve_http


async def serve_on_loopback(host: SimHost) -> asyncio.Server:
    """Listen on 127.0.0.1 (a free port: `server.sockets[0].getsockname()[1]`)."""

    def route(
        method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, object] | TextPage]:
        server = host.unit.server
        if server is None or server.config is None:
            return 503, {"error": "the service is not running"}
        return server.handle_http(method, path, body, headers)

    return await asyncio.start_server(
        lambda reader, writer: serve_http(reader, writer, route), "127.0.0.1", 0
    )


async def serve_dcgm_on_loopback(host: SimHost) -> asyncio.Server:
    """The host's dcgm-exporter (console/sim/dcgm.py) on 127.0.0.1, a free port: what a
    Prometheus scrapes for the GPUs (`:9400/metrics` on a real node)."""

    def route(
        method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[int, dict[str, object] | TextPage]:
        if path.split("?", 1)[0] != "/metrics":
            return 404, {"error": "not found"}
        server = host.unit.server
        phase: Phase = "idle" if server is None else "serving" if server.ready else "loading"
        load = server.gpu_load if server is not None else Load(running=0.0)
        text = dcgm.page(host.name, host.gpus, phase, load, host.unit.xids)
        return 200, TextPage(lambda accept: (dcgm.TEXT, text))

    return await asyncio.start_server(
        lambda reader, writer: serve_http(reader, writer, route), "127.0.0.1", 0
    )
