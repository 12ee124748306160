#!/usr/bin/env python3
"""What pald's Prometheus metrics cost, on the big cluster of place_latency.py (1,024 nodes x 8
GPUs, 4 ranked classes = 32,768 per-GPU series, 5,000 held PAL jobs).

Prints, all in one process:
  - place p50/p99 over pald's real unix socket (what place_latency.py reports) with the plain
    handler and with the metrics-instrumented one, in alternating blocks so both see the same
    machine load, and their ratio;
  - one publish (state snapshot built on the event loop each cycle);
  - a scrape of /metrics over HTTP (what Prometheus does): median and max of 20, and its size.
Targets: instrumented p99 within 5% of plain; scrape < 50 ms.

Usage: python3 benchmarks/metrics_cost.py [--nodes 1024] [--gpus 8] [--pending 5000] [--n 4000]
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from place_latency import build_pald, pct, serve  # noqa: E402

from pal_slurm.model.comment_grammar import CommentSpec  # noqa: E402
from pal_slurm.daemon.metrics import PaldMetrics, Publisher, instrument, serve_metrics  # noqa: E402
from pal_slurm.daemon.protocol import JobFields, PlaceRequest, encode_request  # noqa: E402


def build(args):
    rng = random.Random(1)
    pald, _nodes, _held = build_pald(args.nodes, args.gpus, args.pending, rng)
    pald.sync_and_cycle()
    pald.check_leadership()  # the default AlwaysLeader: leading
    return pald, rng


def serve_socket(handler, settle, path):
    """pald's SocketServer (place_latency's) in a thread, wired as pald's main wires it; a
    connected client socket + reader."""
    serve(handler, path, settle)
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s, s.makefile("rb")


def _decisions(metrics) -> dict:
    return {tuple(sorted(s.labels.values())): s.value for fam in metrics.registry.collect()
            if fam.name == "pal_decisions" for s in fam.samples if s.name.endswith("_total")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--pending", type=int, default=5000)
    ap.add_argument("--n", type=int, default=4000)
    args = ap.parse_args()
    pald, rng = build(args)
    metrics = PaldMetrics()
    tmp = tempfile.mkdtemp()
    counted = instrument(pald.answer, pald.settle, metrics)
    socks = {"plain": serve_socket(pald.answer, pald.settle, f"{tmp}/plain.sock"),
             "metrics": serve_socket(counted.answer, counted.settle, f"{tmp}/metrics.sock")}
    times: dict[str, list[float]] = {"plain": [], "metrics": []}
    block = 200
    for b in range(args.n // block):
        for name in (("plain", "metrics") if b % 2 == 0 else ("metrics", "plain")):
            s, reader = socks[name]
            for i in range(block):
                r = PlaceRequest(JobFields(uid=1000, comment="pal:class=resnet,mode=now", gpus_per_node=rng.choice([1, 2, 4])),
                                 CommentSpec("resnet", mode="now"), request_id=f"{name}{b}-{i}")
                line = encode_request(r)
                t = time.perf_counter()
                s.sendall(line)
                reader.readline()
                times[name].append(time.perf_counter() - t)
            pald.service.clear_reservations()
    outcomes = {k[0]: v for k, v in _decisions(metrics).items()}
    print(f"cluster: {args.nodes} x {args.gpus} GPUs, 4 ranked classes, {args.pending} held jobs; "
          f"instrumented answers: {outcomes}")
    for name in ("plain", "metrics"):
        print(f"socket place, {name:7} handler: p50 {pct(times[name], 50):.3f} ms  p99 {pct(times[name], 99):.3f} ms")
    ratio = pct(times["metrics"], 99) / pct(times["plain"], 99)
    print(f"ratio metrics/plain: p50 {pct(times['metrics'], 50) / pct(times['plain'], 50):.3f}x  p99 {ratio:.3f}x "
          f"(target p99 < 1.05x: {'met' if ratio < 1.05 else 'MISSED'})")

    publisher = Publisher(metrics, drift_threshold=0.05)
    t = time.perf_counter()
    publisher.publish(pald)  # first publish also converts the ranking (once per ranking version)
    first = time.perf_counter() - t
    pubs = []
    for _ in range(20):
        t = time.perf_counter()
        publisher.publish(pald)
        pubs.append(time.perf_counter() - t)
    print(f"publish (event loop, once per cycle): first {first * 1000:.1f} ms, then median {pct(pubs, 50):.2f} ms")

    server = serve_metrics(metrics, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    scrapes, size = [], 0
    for _ in range(20):
        t = time.perf_counter()
        body = urllib.request.urlopen(url, timeout=10).read()
        scrapes.append(time.perf_counter() - t)
        size = len(body)
    server.shutdown()
    med = pct(scrapes, 50)
    print(f"scrape /metrics over HTTP: median {med:.1f} ms, max {max(scrapes) * 1000:.1f} ms, "
          f"{size / 1024:.0f} KiB, {len(metrics.state.gpu_slowdowns)} per-GPU series "
          f"(target < 50 ms: {'met' if med < 50 else 'MISSED'})")


if __name__ == "__main__":
    main()
