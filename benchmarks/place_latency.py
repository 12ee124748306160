#!/usr/bin/env python3
"""pald `place` latency on a big cluster: 1,024 nodes x 8 GPUs, 5,000 held (pending) PAL jobs.

Prints p50/p99 (ms) of:
  - in-process `Pald.handle(place)` (what the socket handler runs),
  - the full round trip over pald's real unix socket (encode, send, decode),
  - the background loop's two steps: one sync (the fake Slurm's jobs and nodes read into
    pald's view) and one cycle over the held jobs (plan, release, reserve), and the cycle's
    plan alone on a fresh service (`PlacementService.plan_cycle`),
  - the set-up (building the state and pald's first sync + cycle) and the process's RSS after
    it (psutil: the benchmark's process is pald's state plus the fake Slurm's job list).
Baseline in the same process: a no-op handler over the same socket, so the socket and JSON
cost can be told apart from the decision cost. `--running N` adds N running jobs to what the
fake Slurm reports (every busy GPU in a 1- or 2-GPU job, the rest CPU-only jobs), read by
each sync like squeue's running jobs.

Usage: python3 benchmarks/place_latency.py [--nodes 1024] [--gpus 8] [--pending 5000] [--running 0]
                                          [--n 2000] [--cycles 20]
A site's scale (65,536 GPUs, 50,000 held, 100,000 running; targets: place p99 < 1 ms in
process, < 2 ms over the socket, one cycle over the held jobs < 1 s):
  python3 benchmarks/place_latency.py --nodes 8192 --gpus 8 --pending 50000 --running 100000 --n 500 --cycles 2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pal_slurm.config import Config, DaemonConfig  # noqa: E402
from pal_slurm.daemon.app import Pald  # noqa: E402
from pal_slurm.daemon.main import memory_policy  # noqa: E402
from pal_slurm.model.comment_grammar import CommentSpec  # noqa: E402
from pal_slurm.daemon.service import PlacementService, ServiceSettings  # noqa: E402
from pal_slurm.daemon.protocol import HealthReply, JobFields, PlaceRequest, encode_request  # noqa: E402
from pal_slurm.daemon.server import SocketServer  # noqa: E402
from pal_slurm.intake.job import from_hook  # noqa: E402
from pal_slurm.model.site import NodeFacts, PartitionFacts, ReservationFacts, SiteView  # noqa: E402
from pal_slurm.slurm.readers import JobInfo, NodeInfo  # noqa: E402
from pal_slurm.store.memory import MemoryRepository  # noqa: E402
from pal_slurm.store.records import RankingEntry  # noqa: E402


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q / 100 * len(v)))] * 1000


class Reader:
    release = "Slurm 22.05 (benchmark: no Slurm)"

    def __init__(self, nodes, jobs):
        self._n, self._j = nodes, jobs

    def nodes(self):
        return self._n

    def jobs(self):
        return self._j

    def site(self, nodes, partitions=None):
        """A site as pald reads it: a default partition of every node, a second one of half of
        them, a feature on every fourth node, per-slot GPU types, one reservation."""
        names = [n.name for n in nodes]
        facts = {n.name: NodeFacts(n.name, True, ("p",), frozenset({"fast"} if i % 4 == 0 else ()), 64, 48,
                                   512000, 400000, n.gpus, frozenset(f"s{s}" for s in range(n.gpus)))
                 for i, n in enumerate(nodes)}
        parts = {"p": PartitionFacts("p", frozenset(names), default=True),
                 "half": PartitionFacts("half", frozenset(names[: len(names) // 2]))}
        resv = {"r": ReservationFacts("r", frozenset(names[-4:]), 0.0, 4e9, True)}
        return SiteView(facts, parts, resv)


class NoActuator:
    def place_held_job(self, *a, **k):
        pass

    def place_nodes(self, *a, **k):
        pass

    def release(self, *a, **k):
        pass

    def hold_many(self, *a, **k):
        pass

    def set_admin_comment(self, *a, **k):
        pass


def running_jobs(nodes, count: int, rng: random.Random):
    """`count` running jobs (at least one per busy GPU group): every node's busy GPUs split in
    1- or 2-GPU jobs, then CPU-only jobs round the nodes until `count`; limits 1-24 h."""
    out = []

    def job(node, slots):
        return JobInfo(400000 + len(out), "r", "RUNNING", "None", 1000, "", "", (node,), (), 1,
                       f"gres:gpu:{len(slots)}" if slots else "", {node: frozenset(slots)} if slots else {},
                       1, 0, 1, time_limit_s=3600.0 * rng.randint(1, 24))

    for n in nodes:
        used = sorted(n.used_slots)
        while used:
            take = min(len(used), rng.choice([1, 2]))
            out.append(job(n.name, used[:take]))
            used = used[take:]
    i = 0
    while len(out) < count:
        out.append(job(nodes[i % len(nodes)].name, []))
        i += 1
    return out


def build_pald(num_nodes: int, gpus: int, pending: int, rng: random.Random, running: int = 0):
    """(pald, nodes, held jobs): a big cluster, 60% of GPUs busy, `pending` held PAL jobs and a
    4-class ranking in a memory store; Slurm faked by Reader, nothing acts on Slurm. With
    `running`, Slurm also reports that many running jobs (running_jobs)."""
    names = [f"gpu{i:04d}" for i in range(num_nodes)]
    nodes = []
    for name in names:
        used = frozenset(s for s in range(gpus) if rng.random() < 0.6)
        nodes.append(NodeInfo(name, "mixed", (), gpus, len(used), used, 1, (), ("p",)))
    held = [JobInfo(100000 + i, "j", "PENDING", "JobHeldUser", 1000, "pal:class=resnet", "pal:defer", (), (), 1,
                    f"gres:gpu:{rng.choice([1, 2, 4, 8])}", {}, 0, 1000 + i, 0) for i in range(pending)]
    store = MemoryRepository()
    entries = [RankingEntry(n, s, c, v, v, 0) for n in names for s in range(gpus) for c in "ABCD"
               for v in [rng.choice([0.95, 1.0, 1.0, 1.05, 1.3])]]
    store.write_ranking("optimal", entries)
    tmp = tempfile.mkdtemp()
    cfg = Config(daemon=DaemonConfig(socket=f"{tmp}/pald.sock", heartbeat_file=f"{tmp}/hb"))
    jobs = held + running_jobs(nodes, running, rng) if running else held
    pald = Pald(cfg, store, Reader(nodes, jobs), NoActuator(), memory=memory_policy(cfg))  # as pald runs
    pald.refresh_store()
    return pald, nodes, held


def serve(handler, path, settle=None):
    """pald's SocketServer on its own event loop in a daemon thread: (loop, server); `settle`
    as pald's main wires it (called after each reply's write)."""
    loop = asyncio.new_event_loop()
    srv = SocketServer(handler, path, {os.geteuid(), 0}, settle=settle)
    ready = threading.Event()

    def run():
        asyncio.set_event_loop(loop)
        loop.run_until_complete(srv.start())
        ready.set()
        loop.run_forever()

    threading.Thread(target=run, daemon=True).start()
    ready.wait(5)
    return loop, srv


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--pending", type=int, default=5000)
    ap.add_argument("--running", type=int, default=0)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--cycles", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(1)
    start = time.perf_counter()
    pald, nodes, held = build_pald(args.nodes, args.gpus, args.pending, rng, args.running)
    tmp = tempfile.mkdtemp()
    t0 = time.perf_counter()
    pald.sync_and_cycle()  # includes planning the held jobs once
    sync_s = time.perf_counter() - t0
    print(f"cluster: {args.nodes} nodes x {args.gpus} GPUs = {args.nodes * args.gpus} GPUs, "
          f"{sum(len(n.used_slots) for n in nodes)} busy, {args.pending} held PAL jobs, "
          f"{len(pald.reader.jobs()) - len(held)} running jobs")
    print(f"one sync + cycle (plan {args.pending} held jobs, no Slurm I/O): {sync_s * 1000:.1f} ms (first)")
    print(f"set-up (state built, first sync + cycle): {time.perf_counter() - start:.1f} s; "
          f"RSS after it: {psutil.Process().memory_info().rss / 2**20:.0f} MiB")
    syncs, cycles = [], []
    for _ in range(args.cycles):  # the steady state: the fake Slurm still shows every job held
        t0 = time.perf_counter()
        to_plan = pald.sync()  # reading the jobs and nodes into pald's view (no Slurm I/O)
        t1 = time.perf_counter()
        if to_plan:
            pald.cycle(to_plan)  # the cycle over the held jobs: plan, release, reserve
        syncs.append(t1 - t0)
        cycles.append(time.perf_counter() - t1)
    print(f"  then {args.cycles} more: sync p50 {pct(syncs, 50):.1f} ms  p99 {pct(syncs, 99):.1f} ms; "
          f"cycle over the held jobs p50 {pct(cycles, 50):.1f} ms  p99 {pct(cycles, 99):.1f} ms")

    # requests come from distinct users (one user's placements that no read has shown yet are
    # capped: the same user would be answered `pass` after a few, which is not the decision);
    # they carry the hook's deadline (far ahead: every one is answered) where the protocol has it
    deadline = {"deadline_ms": int(time.time() * 1000) + 3_600_000} \
        if "deadline_ms" in PlaceRequest.__dataclass_fields__ else {}
    print(f"requests carry deadline_ms: {'yes' if deadline else 'no'}")

    def req(i):
        return PlaceRequest(JobFields(uid=2000 + i, comment="pal:class=resnet,mode=now", gpus_per_node=rng.choice([1, 2, 4])),
                            CommentSpec("resnet", mode="now"), request_id=f"b{i}", **deadline)

    # In-process: the decision itself. Reservations accumulate as in a burst of submissions;
    # a sync and no reservations every 200 requests play the role of the 1 s sync. Every variant starts from
    # the same state (no reservations) and reports its answers, so a fast figure that is really
    # a pass shows as one.
    def fresh_view(site):
        """A sync (a view older than max_view_age_s is answered `pass`: stale_view), no
        reservations, and the site view as the variant has it (a sync reads it again)."""
        pald.sync()
        pald.service.clear_reservations()
        if site is None:
            pald.service.site = None

    def timed(make, site=True):
        fresh_view(site)
        before = dict(pald.counts)
        out = []
        for i in range(args.n):
            r = make(i)
            t = time.perf_counter()
            pald.handle(r)
            out.append(time.perf_counter() - t)
            if i % 200 == 199:  # the 1 s sync's part (untimed)
                fresh_view(site)
        answers = {k: pald.counts[k] - before.get(k, 0) for k in ("place", "defer", "pass")}
        return out, ", ".join(f"{v} {k}" for k, v in answers.items() if v)

    def line(label, measured):
        times, answers = measured
        return f"{label}: p50 {pct(times, 50):.3f} ms  p99 {pct(times, 99):.3f} ms  (answers: {answers})"

    def restricted(i):
        return PlaceRequest(JobFields(uid=2000 + i, comment="pal:class=resnet,mode=now", gpus_per_node=rng.choice([1, 2]),
                                      partition="half", features="fast"),
                            CommentSpec("resnet", mode="now"), request_id=f"x{i}")

    # What judging eligibility costs: without a site view (no eligibility judged: the decision
    # alone, the baseline), with it (partitions, features, a reservation: every request is
    # judged), and restricted requests (-p half --constraint=fast).
    no_site = timed(req, site=None)
    with_site = timed(req)
    narrow = timed(restricted)
    print(line("in-process place (mode=now, full PAL choice, no site view)", no_site))
    print(line("  with the site view (eligibility judged)", with_site))
    print(line("  -p half --constraint=fast (1/8 of the nodes)", narrow))
    print(f"  ratio p50 site/no site {pct(with_site[0], 50) / pct(no_site[0], 50):.2f}x, "
          f"restricted {pct(narrow[0], 50) / pct(no_site[0], 50):.2f}x")
    auto = []
    pald.sync()
    for _ in range(args.n):
        r = PlaceRequest(JobFields(uid=1000, comment="pal:class=resnet", gpus_per_node=2), CommentSpec("resnet"))
        t = time.perf_counter()
        pald.handle(r)
        auto.append(time.perf_counter() - t)
    print(f"in-process place (default mode, {args.pending} jobs queued -> defer): p50 {pct(auto, 50):.3f} ms  "
          f"p99 {pct(auto, 99):.3f} ms")

    # The submit path behind held jobs (Engine.place_behind): 64 held jobs that wait for four
    # whole nodes each (a cycle planned them), then new 1-GPU jobs in the default mode: each
    # answer is a plan over the held jobs and the new one (placed when that plan starts it).
    wide = [JobInfo(200000 + i, "w", "PENDING", "JobHeldUser", 1000, "pal:class=resnet", "pal:defer", (), (), 4,
                    f"gres:gpu:{args.gpus}", {}, 0, 1000 + i, 0, time_limit_s=3600) for i in range(64)]
    for placement in ("pal", "pal-fit"):
        service = PlacementService(ServiceSettings(placement=placement))
        service.set_snapshot(pald.service.snapshot)
        service.observe_cluster(pald.service.view, now=0.0, held_jobs=len(wide))
        service.plan_cycle(wide, now=0.0)
        assert service.queue.waiting is not None
        service.queue.held_jobs = len(service.queue.waiting)
        behind, answers = [], {"place": 0, "defer": 0, "pass": 0}
        for i in range(min(args.n, 200)):
            r = PlaceRequest(JobFields(uid=1000, comment="pal:class=resnet", gpus_per_node=1, time_limit=30),
                             CommentSpec("resnet"))
            t = time.perf_counter()
            reply = service.place(from_hook(r.job, r.pal, f"n{i}", 1.0, service.class_map), 1.0, r.job.uid)
            behind.append(time.perf_counter() - t)
            answers[reply.decision.value] += 1
            service.retract(f"n{i}", reply.decision)  # the same question each time
        print(f"in-process place behind {len(service.queue.waiting)} held jobs ({placement}, submit-path backfill): "
              f"p50 {pct(behind, 50):.3f} ms  p99 {pct(behind, 99):.3f} ms  (answers: {answers})")

    # The submit path of a placement that plans around the running jobs (pal-fit: it may wait
    # for a running job's end instead of spreading a job): nothing held, one running job per
    # node on its busy GPUs (limits 1-24 h); new jobs in the default mode, with the running
    # jobs seen (a plan over them and the new job) and without (the baseline: place_one).
    running = [JobInfo(300000 + i, "r", "RUNNING", "None", 1000, "pal:class=resnet,net=high", "", (n.name,), (),
                       1, f"gres:gpu:{len(n.used_slots)}", {n.name: n.used_slots}, 1, 0, 1,
                       time_limit_s=3600.0 * rng.randint(1, 24)) for i, n in enumerate(nodes) if n.used_slots]
    service = PlacementService(ServiceSettings(placement="pal-fit"))
    service.set_snapshot(pald.service.snapshot)
    service.observe_cluster(pald.service.view, now=0.0)
    service.observe_running(running, now=1.0)
    seen = list(service.running)
    # one node, per-node on several nodes (the several-node wait for faster nodes), per-job
    shapes = [dict(gpus_per_node=1), dict(gpus_per_node=4), dict(gpus_per_job=8), dict(gpus_per_job=16),
              dict(gpus_per_node=2, min_nodes=4, max_nodes=4), dict(gpus_per_node=4, min_nodes=2, max_nodes=2)]
    figures = {}
    for label, visible in (("seen", seen), ("not seen (baseline)", [])):
        service.running = visible
        times, answers = [], {"place": 0, "defer": 0, "pass": 0}
        for i in range(min(args.n, 600)):
            shape = shapes[i % len(shapes)]
            r = PlaceRequest(JobFields(uid=1000, comment="pal:class=bert,net=high", time_limit=120, **shape),
                             CommentSpec("bert", net="high"))
            t = time.perf_counter()
            reply = service.place(from_hook(r.job, r.pal, f"f{i}", 1.0, service.class_map), 1.0, r.job.uid)
            times.append(time.perf_counter() - t)
            answers[reply.decision.value] += 1
            service.retract(f"f{i}", reply.decision)
        figures[label] = times
        print(f"in-process place, pal-fit, nothing held, {len(running)} running jobs {label}: "
              f"p50 {pct(times, 50):.3f} ms  p99 {pct(times, 99):.3f} ms  (answers: {answers})")
    print(f"  ratio p50 seen/not seen {pct(figures['seen'], 50) / pct(figures['not seen (baseline)'], 50):.1f}x")

    plan_t = []
    for _ in range(5):
        service = PlacementService(ServiceSettings(backfill=True))  # a fresh state: planning reserves
        service.set_snapshot(pald.service.snapshot)
        service.observe_cluster(pald.service.view, now=0.0)
        t = time.perf_counter()
        service.plan_cycle(held, now=0.0)
        plan_t.append(time.perf_counter() - t)
    print(f"deferred cycle plan over {args.pending} held jobs (backfill): median {sorted(plan_t)[2] * 1000:.1f} ms")

    # Over the real socket, against a no-op handler as the baseline.
    def round_trips(path, n):
        out = []
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
            f = s.makefile("rb")
            for i in range(n):
                line = encode_request(req(i))
                t = time.perf_counter()
                s.sendall(line)
                f.readline()
                out.append(time.perf_counter() - t)
                if i % 200 == 199:
                    pald.sync()
                    pald.service.clear_reservations()
        return out

    pald.sync()
    pald.service.clear_reservations()
    loop1, srv1 = serve(pald.answer, f"{tmp}/real.sock", pald.settle)  # as pald's main wires it
    loop2, srv2 = serve(lambda r: HealthReply(status="ok"), f"{tmp}/noop.sock")
    real = round_trips(f"{tmp}/real.sock", args.n)
    noop = round_trips(f"{tmp}/noop.sock", args.n)
    print(f"socket round trip, pald place: p50 {pct(real, 50):.3f} ms  p99 {pct(real, 99):.3f} ms")
    print(f"socket round trip, no-op handler (baseline): p50 {pct(noop, 50):.3f} ms  p99 {pct(noop, 99):.3f} ms")
    print(f"ratio pald/no-op p50: {pct(real, 50) / pct(noop, 50):.2f}x")
    targets = ((f"in-process place p99 (with the site view; answers: {with_site[1]}) < 1 ms",
                pct(with_site[0], 99) < 1.0),
               ("socket round trip p99 < 2 ms", pct(real, 99) < 2.0),
               ("one cycle over the held jobs < 1 s", pct(cycles, 99) < 1000.0))
    for label, ok in targets:
        print(f"target {label}: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
