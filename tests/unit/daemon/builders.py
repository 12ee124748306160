"""Builders and small fakes for daemon unit tests (the real Slurm path is in tests/integration)."""

from __future__ import annotations

from datetime import datetime, timezone

from pal_slurm.model.comment_grammar import CommentSpec
from pal_slurm.daemon.protocol import JobFields, PlaceReply, PlaceRequest
from pal_slurm.daemon.service import PlacementService
from pal_slurm.intake.job import from_hook
from pal_slurm.model import ClusterView
from pal_slurm.slurm.gres import node_gres_field
from pal_slurm.slurm.readers import JobInfo, NodeInfo
from pal_slurm.store.records import RankingEntry, RankingSnapshot


def view(nodes=4, gpus=4, busy=()):
    v = ClusterView.from_layout([(f"gpu{i + 1:02d}", gpus) for i in range(nodes)])
    return v.with_free(set(range(v.size)) - set(busy))


def request(cls="resnet", gpn=None, gpj=None, nodes=None, mode=None, gpus=None, rid=None, net=None):
    comment = (f"pal:class={cls}" + (f",gpus={gpus}" if gpus else "") + (f",mode={mode}" if mode else "")
               + (f",net={net}" if net else ""))
    return PlaceRequest(
        job=JobFields(uid=1000, comment=comment, gpus_per_node=gpn, gpus_per_job=gpj, min_nodes=nodes),
        pal=CommentSpec(cls, gpus=gpus, mode=mode, net=net),
        request_id=rid,
    )


def place(service: PlacementService, req: PlaceRequest, now: float, key: str) -> PlaceReply:
    """`service.place` on the hook's request read by pald's intake (no site rules: the spec as sent)."""
    return service.place(from_hook(req.job, req.pal, key, now, service.class_map), now, req.job.uid)


def snapshot(scores: dict, version=3, nodes=4, gpus=4):
    """scores: {class: {(node, slot): (score, sf)}}; unspecified GPUs: 1.0."""
    entries = []
    for cls, per in scores.items():
        for (node, slot), (score, sf) in per.items():
            entries.append(RankingEntry(node, slot, cls, score, sf, 1 if sf > 1.2 else 0))
    return RankingSnapshot(version, "optimal", datetime.now(timezone.utc), tuple(entries))


def held_job(job_id, gpn=2, nodes=1, cls="resnet", submit=0, tag="pal:defer;req=x", gpj=None, time_limit_s=None):
    """A job the hook held: `gpn` GPUs per node (--gres), or `gpj` in total (--gpus) when given."""
    return JobInfo(job_id=job_id, name="j", state="PENDING", reason="JobHeldUser", user_id=1000,
                   comment=f"pal:class={cls}", admin_comment=tag, nodes=(), required_nodes=(),
                   node_count=nodes, tres_per_node="" if gpj else f"gres:gpu:{gpn}", gpu_slots={}, priority=0,
                   submit_time=submit, start_time=0, time_limit_s=time_limit_s,
                   tres_per_job=f"gres:gpu:{gpj}" if gpj else "")


def node_info(name, gpus=4, used=(), gres=None):
    """A node as sinfo shows it; per-slot typed GRES (as on the lab) unless `gres` says otherwise."""
    return NodeInfo(name=name, state="idle" if not used else "mixed", state_flags=(), gpus=gpus,
                    gpus_used=len(used), used_slots=frozenset(used), weight=1, features=(), partitions=("debug",),
                    gres=node_gres_field(gpus) if gres is None else gres)


class FakeReader:
    def __init__(self, nodes, jobs=()):
        self._nodes = list(nodes)
        self._jobs = list(jobs)
        self.fail = None
        self.release = "Slurm 22.05.8 (openapi v0.0.38)"
        self.site_view = None

    def nodes(self):
        if self.fail:
            raise self.fail
        return self._nodes

    def jobs(self):
        if self.fail:
            raise self.fail
        return self._jobs

    def site(self, nodes, partitions=None):
        """A site with partitions only when a test gives them (None: every GPU node eligible)."""
        if self.fail:
            raise self.fail
        return self.site_view


def acts(calls):
    """The actuator calls that act on jobs (pin, release, hold, unpin), without the tag writes."""
    return [c for c in calls if c[0] != "admin_comment"]


class FakeActuator:
    def __init__(self, fail_for=()):
        self.calls = []
        self.fail_for = set(fail_for)

    def _maybe_fail(self, job_id):
        if job_id in self.fail_for:
            from pal_slurm.slurm.errors import SlurmError

            raise SlurmError(f"scontrol refused job {job_id}")

    def place_held_job(self, job_id, nodes, gres_spec, release=True, partition=None):
        self._maybe_fail(job_id)
        self.calls.append(("place", job_id, tuple(nodes), gres_spec) + ((partition,) if partition else ()))

    def place_nodes(self, job_id, nodes, release=True, partition=None):
        self._maybe_fail(job_id)
        self.calls.append(("nodes", job_id, tuple(nodes)) + ((partition,) if partition else ()))

    def hold_many(self, job_ids):
        for job_id in job_ids:
            self._maybe_fail(job_id)
        self.calls.append(("hold", tuple(job_ids)))

    def release(self, job_id):
        self._maybe_fail(job_id)
        self.calls.append(("release", job_id))

    def hold(self, job_id):
        self._maybe_fail(job_id)
        self.calls.append(("hold", job_id))

    def unpin(self, job_id):
        self._maybe_fail(job_id)
        self.calls.append(("unpin", job_id))


    def set_admin_comment(self, job_id, text):
        self._maybe_fail(job_id)
        self.calls.append(("admin_comment", job_id, text))

class ServerThread:
    """pald's SocketServer on its own event loop in a thread (tests talk to it over the socket)."""

    def __init__(self, handler, path, allowed_uids=None, settle=None):
        import asyncio
        import os
        import threading

        from pal_slurm.daemon.server import SocketServer

        self.loop = asyncio.new_event_loop()
        self.server = SocketServer(handler, str(path), allowed_uids or {0, os.geteuid()}, settle=settle)
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import asyncio

        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.start())
        self._ready.set()
        self.loop.run_forever()

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(5), "server did not start"
        return self

    def __exit__(self, *exc):
        import asyncio

        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
