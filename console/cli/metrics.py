"""`specops metrics`: every host's speculative-decoding numbers from SGLang's own `/metrics`
(through each host's SSH connection) or, with `prometheus_url`, from Prometheus for the whole
fleet at once. Every row names its source."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from rich.table import Table

from console.cli.common import (
    EXIT_FAILED,
    EXIT_UNREACHABLE,
    UsageError,
    load_profiles,
    new_session,
    out,
)
from console.hosts.profiles import Profile, select
from console.local.settings import load_settings
from console.transport.http import HttpError
from console.transport.prometheus import PrometheusError, parse_url
from console.transport.ssh import ConnState, Disconnected
from console.watch.server_metrics import MetricsUnavailable
from console.watch.sources import HostNumbers, from_prometheus, from_server

MAX_WINDOW_S = 86_400.0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    metrics = sub.add_parser(
        "metrics",
        parents=[common],
        help="accept length, throughput, requests: /metrics or Prometheus",
    )
    metrics.add_argument("hosts", nargs="*", metavar="HOST")
    metrics.add_argument(
        "--window",
        type=float,
        default=None,
        metavar="S",
        help="seconds the accept length is taken over, from the counters "
        "(default: 5 from the servers, 300 from Prometheus)",
    )
    metrics.add_argument(
        "--prometheus",
        metavar="URL",
        default=None,
        help="read every host from this Prometheus (default: prometheus_url in settings)",
    )
    metrics.add_argument(
        "--server",
        action="store_true",
        help="read each server's /metrics over SSH even when prometheus_url is set",
    )
    metrics.add_argument("--json", action="store_true", help="one JSON object per host")


def run(args: argparse.Namespace) -> int:
    url = None if args.server else (args.prometheus or load_settings().prometheus_url)
    if url:
        try:
            parse_url(url)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    window = args.window if args.window is not None else (300.0 if url else 5.0)
    if not 0 <= window <= MAX_WINDOW_S:
        raise UsageError(f"--window {window:g}: must be between 0 and {MAX_WINDOW_S:g} seconds")
    profiles = select(load_profiles(args), args.hosts)
    return asyncio.run(
        _prometheus(args, url, profiles, window) if url else _servers(args, profiles, window)
    )


async def _one(profile: Profile, window: float) -> HostNumbers | str:
    session = new_session(profile)
    session.start()
    try:
        state = await session.wait_settled(profile.ssh.connect_timeout_s + 5)
        if state.state is not ConnState.CONNECTED:
            return f"{state.state.value}: {state.detail}"
        try:
            return await from_server(session, profile, window)
        except (MetricsUnavailable, HttpError, Disconnected) as exc:
            return f"failed: {exc}"
    finally:
        await session.close()


async def _servers(args: argparse.Namespace, profiles: list[Profile], window: float) -> int:
    results = await asyncio.gather(*(_one(p, window) for p in profiles))
    numbers = {
        p.name: r for p, r in zip(profiles, results, strict=True) if isinstance(r, HostNumbers)
    }
    errors = {p.name: r for p, r in zip(profiles, results, strict=True) if isinstance(r, str)}
    _print(args, profiles, numbers, errors)
    if any(not e.startswith("failed") for e in errors.values()):
        return EXIT_UNREACHABLE
    return EXIT_FAILED if errors else 0


async def _prometheus(
    args: argparse.Namespace, url: str, profiles: list[Profile], window: float
) -> int:
    try:
        numbers = await from_prometheus(url, profiles, window)
    except PrometheusError as exc:
        out.print(f"specops: {exc}", markup=False)
        return EXIT_FAILED
    errors = {
        p.name: f"no series in Prometheus at {url}" for p in profiles if p.name not in numbers
    }
    _print(args, profiles, numbers, errors)
    return EXIT_FAILED if errors else 0


def kv_text(n: HostNumbers) -> str:
    """`42% 38144` (KV cache in use: share, tokens); `-` when the page has neither."""
    parts = []
    if n.token_usage is not None:
        parts.append(f"{n.token_usage:.0%}")
    if n.used_tokens is not None:
        parts.append(f"{n.used_tokens:.0f}")
    return " ".join(parts) or "-"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _print(
    args: argparse.Namespace,
    profiles: list[Profile],
    numbers: dict[str, HostNumbers],
    errors: dict[str, str],
) -> None:
    if args.json:
        for p in profiles:
            record = (
                numbers[p.name].record()
                if p.name in numbers
                else {"host": p.name, "error": errors[p.name]}
            )
            print(json.dumps(record), flush=True)
        return
    table = Table(
        "host", "source", "accept", "window", "rate", "tok/s", "run", "queue", "graph", "KV"
    )
    for p in profiles:
        n = numbers.get(p.name)
        if n is None:
            table.add_row(p.name, errors[p.name], *("-" * 8))
            continue
        graph = "-" if n.cuda_graph is None else ("on" if n.cuda_graph else "off")
        table.add_row(
            p.name,
            n.source,
            _fmt(n.accept_len),
            f"{_fmt(n.accept_len_window)} ({n.window_s:.0f}s)",
            _fmt(n.accept_rate),
            _fmt(n.gen_throughput, 0),
            _fmt(n.running, 0),
            _fmt(n.queued, 0),
            graph,
            kv_text(n),
        )
    out.print(table)
