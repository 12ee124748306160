"""An in-memory Repository: fast unit tests, and proof that the interface is not SQL-shaped.

It honours the same contract as `SqlRepository` (the same contract tests run on both): same
validation, same ordering, same versioning, copies in and out so callers cannot alias state.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime
from typing import Iterable

from pal_slurm.model.classes import DEFAULT_APP_CLASSES
from pal_slurm.store.errors import InvalidRecord
from pal_slurm.store.records import (
    DecisionRecord,
    GpuRecord,
    HeldJob,
    HeldState,
    Heartbeat,
    NodeRecord,
    RankingEntry,
    RankingSnapshot,
    Sample,
    Switch,
    utcnow,
)
from pal_slurm.store.repository import (
    as_utc,
    check_batch_uuids,
    check_class,
    check_entries,
    check_gpu,
    check_held,
    check_json,
    check_name,
    check_nodes_map,
    check_sample,
    check_switch,
    normalise_app,
)


class MemoryRepository:
    """Everything in dicts behind one lock. Seeds the default application classes."""

    def __init__(self, seed_app_classes: bool = True) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, NodeRecord] = {}
        self._gpus: dict[tuple[str, int], GpuRecord] = {}
        self._samples: list[Sample] = []
        self._rankings: dict[int, RankingSnapshot] = {}
        self._apps: dict[str, str] = dict(DEFAULT_APP_CLASSES) if seed_app_classes else {}
        self._decisions: list[DecisionRecord] = []
        self._held: dict[str, HeldJob] = {}
        self._beats: dict[str, Heartbeat] = {}
        self._switches: dict[str, Switch] = {}

    # ---- topology -------------------------------------------------------------------
    def upsert_nodes(self, nodes: Iterable[NodeRecord]) -> None:
        nodes = list(nodes)
        for n in nodes:
            check_name(n.name, "node name")
        with self._lock:
            for n in nodes:
                self._nodes[n.name] = n

    def _ensure_gpu(self, node: str, slot: int, uuid: str | None, model: str | None) -> None:
        self._nodes.setdefault(node, NodeRecord(node))
        old = self._gpus.get((node, slot))
        new = GpuRecord(
            node,
            slot,
            uuid if uuid is not None else (old.uuid if old else None),
            model if model is not None else (old.model if old else None),
        )
        if new.uuid is not None:  # a uuid seen elsewhere before: the GPU moved here
            for key, g in list(self._gpus.items()):
                if g.uuid == new.uuid and key != (node, slot):
                    self._gpus[key] = dataclasses.replace(g, uuid=None)
        self._gpus[(node, slot)] = new

    def upsert_gpus(self, gpus: Iterable[GpuRecord]) -> None:
        gpus = [check_gpu(g) for g in gpus]
        check_batch_uuids((g.node, g.slot, g.uuid) for g in gpus)
        with self._lock:
            for g in gpus:
                self._ensure_gpu(g.node, g.slot, g.uuid, g.model)

    def nodes(self) -> list[NodeRecord]:
        with self._lock:
            return [self._nodes[k] for k in sorted(self._nodes)]

    def gpus(self) -> list[GpuRecord]:
        with self._lock:
            return [self._gpus[k] for k in sorted(self._gpus)]

    # ---- samples ----------------------------------------------------------------------
    def add_samples(self, samples: Iterable[Sample]) -> int:
        checked = []
        for s in samples:
            check_sample(s)
            checked.append(
                dataclasses.replace(
                    s,
                    taken_at=float(s.taken_at),
                    value=float(s.value),
                    metrics=check_json(s.metrics, "metrics"),
                )
            )
        check_batch_uuids((s.node, s.slot, s.uuid) for s in checked)
        with self._lock:
            for s in checked:
                self._ensure_gpu(s.node, s.slot, s.uuid, None)
            self._samples.extend(checked)
        return len(checked)

    def recent_samples(
        self, since: datetime, *, perf_class: str | None = None, include_busy: bool = False
    ) -> list[Sample]:
        since_s = as_utc(since).timestamp()
        with self._lock:
            rows = [
                s
                for s in self._samples
                if s.taken_at >= since_s
                and (perf_class is None or s.perf_class == perf_class)
                and (include_busy or not s.busy)
            ]
            out = []
            for s in rows:
                uuid = self._gpus[(s.node, s.slot)].uuid
                out.append(dataclasses.replace(s, metrics=dict(s.metrics), uuid=uuid))
        return sorted(out, key=lambda s: (s.taken_at, s.node, s.slot))

    # ---- rankings -------------------------------------------------------------------
    def write_ranking(
        self, method: str, entries: Iterable[RankingEntry], created_at: datetime | None = None
    ) -> RankingSnapshot:
        check_name(method, "ranking method")
        rows = tuple(
            dataclasses.replace(e, score=float(e.score), sf=float(e.sf), flags=tuple(e.flags), samples=0, backend="")
            for e in check_entries(entries)
        )
        with self._lock:
            for e in rows:
                self._ensure_gpu(e.node, e.slot, None, None)
            version = max(self._rankings, default=0) + 1
            snap = RankingSnapshot(version, method, as_utc(created_at or utcnow()), rows)
            self._rankings[version] = snap
        return snap

    def latest_ranking(self) -> RankingSnapshot | None:
        with self._lock:
            return self._rankings[max(self._rankings)] if self._rankings else None

    def ranking(self, version: int) -> RankingSnapshot | None:
        with self._lock:
            return self._rankings.get(version)

    # ---- application classes --------------------------------------------------------
    def app_classes(self) -> dict[str, str]:
        with self._lock:
            return dict(sorted(self._apps.items()))

    def set_app_class(self, app: str, perf_class: str) -> None:
        app = normalise_app(app)
        check_class(perf_class)
        with self._lock:
            self._apps[app] = perf_class

    def remove_app_class(self, app: str) -> bool:
        app = normalise_app(app)
        with self._lock:
            return self._apps.pop(app, None) is not None

    # ---- decisions ------------------------------------------------------------------
    def record_decision(self, decision: DecisionRecord) -> None:
        check_name(decision.job_id, "job id")
        nodes = check_nodes_map(decision.nodes)
        if decision.perf_class is not None:
            check_class(decision.perf_class)
        rec = dataclasses.replace(
            decision,
            nodes={n: tuple(s) for n, s in nodes.items()},
            created_at=as_utc(decision.created_at),
        )
        with self._lock:
            self._decisions.append(rec)

    def decisions(self, job_id: str | None = None, limit: int = 100, *, since: datetime | None = None,
                  reason_prefix: str | None = None) -> list[DecisionRecord]:
        cut = None if since is None else as_utc(since)
        with self._lock:
            indexed = [
                (i, d) for i, d in enumerate(self._decisions)
                if (job_id is None or d.job_id == job_id) and (cut is None or d.created_at >= cut)
                and (reason_prefix is None or d.reason.startswith(reason_prefix))
            ]
        indexed.sort(key=lambda p: (p[1].created_at, p[0]), reverse=True)
        return [d for _, d in indexed[:limit]]

    # ---- held jobs ------------------------------------------------------------------
    def add_held_job(self, job: HeldJob) -> None:
        check_held(job)
        job = dataclasses.replace(
            job,
            submitted_at=as_utc(job.submitted_at),
            released_at=None if job.released_at is None else as_utc(job.released_at),
            state=HeldState(job.state),
        )
        with self._lock:
            self._held[job.job_id] = job

    def held_jobs(self, state: HeldState | None = HeldState.HELD) -> list[HeldJob]:
        with self._lock:
            jobs = [j for j in self._held.values() if state is None or j.state == state]
        return sorted(jobs, key=lambda j: (j.submitted_at, j.job_id))

    def mark_released(
        self, job_id: str, at: datetime | None = None, state: HeldState = HeldState.RELEASED
    ) -> bool:
        state = HeldState(state)
        if state == HeldState.HELD:
            raise InvalidRecord("mark_released needs a final state, not 'held'")
        with self._lock:
            job = self._held.get(job_id)
            if job is None or job.state != HeldState.HELD:
                return False
            self._held[job_id] = dataclasses.replace(
                job, state=state, released_at=as_utc(at or utcnow())
            )
            return True

    # ---- switches -------------------------------------------------------------------
    def switches(self) -> dict[str, Switch]:
        with self._lock:
            return dict(self._switches)

    def set_switch(self, switch: Switch) -> None:
        check_switch(switch)
        with self._lock:
            self._switches[switch.name] = dataclasses.replace(switch, changed_at=as_utc(switch.changed_at))

    # ---- heartbeat ------------------------------------------------------------------
    def write_heartbeat(self, beat: Heartbeat) -> None:
        check_name(beat.name, "heartbeat name")
        check_name(beat.holder, "heartbeat holder")
        beat = dataclasses.replace(
            beat, beat_at=as_utc(beat.beat_at), details=check_json(beat.details, "details")
        )
        with self._lock:
            self._beats[beat.name] = beat

    def read_heartbeat(self, name: str) -> Heartbeat | None:
        with self._lock:
            return self._beats.get(name)

    # ---- housekeeping -----------------------------------------------------------------
    def prune(self, before: datetime, *, keep_samples: int = 0, max_rows: int | None = None) -> dict[str, int]:
        cut = as_utc(before)
        limit = max_rows if max_rows is not None else float("inf")
        with self._lock:
            newest: dict[tuple[str, int, str], list[int]] = {}
            order = sorted(range(len(self._samples)), key=lambda i: (-self._samples[i].taken_at, -i))
            for i in order:
                s = self._samples[i]
                newest.setdefault((s.node, s.slot, s.perf_class), []).append(i)
            kept = {i for ids in newest.values() for i in ids[:keep_samples]}
            old = sorted((i for i, s in enumerate(self._samples) if s.taken_at < cut.timestamp() and i not in kept),
                         key=lambda i: (self._samples[i].taken_at, i))
            gone = set(old[:int(min(limit, len(old)))])
            self._samples = [s for i, s in enumerate(self._samples) if i not in gone]
            old_d = sorted((i for i, d in enumerate(self._decisions) if d.created_at < cut),
                           key=lambda i: (self._decisions[i].created_at, i))
            gone_d = set(old_d[:int(min(limit, len(old_d)))])
            self._decisions = [d for i, d in enumerate(self._decisions) if i not in gone_d]
            done = sorted(
                (k for k, j in self._held.items()
                 if j.state != HeldState.HELD and j.released_at is not None and j.released_at < cut),
                key=lambda k: self._held[k].released_at or cut,
            )[:int(min(limit, len(self._held)))]
            for k in done:
                del self._held[k]
            return {"samples": len(gone), "decisions": len(gone_d), "held_jobs": len(done)}

    def interrupt(self) -> int:
        return 0  # memory calls never get stuck

    def close(self) -> None:
        pass
