"""The paths through pald, followed with sys.setprofile on an in-process pald (fake Slurm
reader, the real Slurm actuator on a fake command runner): which pal_slurm modules a place
request passes from the socket handler to its reply, and a held job from the cycle to the
actuator's `start`. A reader follows the same path; the fewer stops, the less to read.

What counts:
- an *event* is a Python function call (sys.setprofile's "call"; C functions are not events);
- an event is *at the path's level* when its caller is pald's own code (a pal_slurm.daemon
  module), or it is the path's first call. What a lower layer (engine, policy, ranking, slurm,
  model) calls inside itself belongs to the stop that entered it;
- calls into the standard library and third-party code are not counted, and do not end a stop;
- calls to methods of pal_slurm.model's classes (value types and dataclasses: their
  __init__, properties, methods) are not counted either: they are data the path carries, not
  places it goes. A module-level function of pal_slurm.model (a parser, a rule) is counted;
- a *stop* is a maximal run of consecutive counted events in one pal_slurm module;
- a module *entered twice* is one with two stops: the path left it and came back (climbed back
  up from a lower layer, or went down again).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from pal_slurm.config import Config, DaemonConfig, MetricsConfig
from pal_slurm.daemon.app import Pald
from pal_slurm.daemon.launcher import SlurmLauncher
from pal_slurm.daemon.main import with_metrics
from pal_slurm.model import DecisionKind
from pal_slurm.slurm.actuator import SlurmActuator

from .builders import FakeReader, held_job, node_info, request

# Bounds the paths reach (the goal: 8 stops, each module entered once). The hook's and
# squeue's fields become the engine's job in one call (intake.job at submit with the
# partitions, the spec's check and the site's rules; intake.held for a cycle's held records,
# with their partitions, PAL's own pins and slot bindings, array elements and admin comments),
# and each decision is one engine call that books its answer in the service's reservations
# (engine.reservations) before it returns: engine.site's `place_and_book` at submit,
# engine.held's `plan_and_book` for the cycle, whose releases carry the Launch the actuator
# starts. The service then tells the held queue (held_queue.planned) and the cycle hands the
# plan to the launcher (launcher.apply_releases). A change that lengthens a path fails here.
PLACE_MAX_STOPS = 7
PLACE_MAX_REENTRIES = 0
CYCLE_MAX_STOPS = 8
CYCLE_MAX_REENTRIES = 0


class ShowJobRunner:
    """Slurm's commands for the real SlurmActuator: `scontrol show job` answers a held job."""

    def __init__(self) -> None:
        self.argvs: list[list[str]] = []

    def run(self, argv: list[str], *, timeout: float | None = None) -> str:
        self.argvs.append(list(argv))
        if argv[:3] == ["scontrol", "-o", "show"]:
            return f"JobId={argv[-1]} JobState=PENDING Priority=0 TresPerNode=gres:gpu:2 NumNodes=1"
        return ""


def _module(frame: FrameType | None) -> str:
    return "" if frame is None else str(frame.f_globals.get("__name__", ""))


def _counted(frame: FrameType) -> str | None:
    module = _module(frame)
    if not module.startswith("pal_slurm."):
        return None
    if not _module(frame.f_back).startswith("pal_slurm.daemon"):
        return None  # below the path's level
    if module.startswith("pal_slurm.model.") and "." in frame.f_code.co_qualname:
        return None  # a method of a model value type
    return module


def follow(call: Callable[..., Any], *args: Any, until: CodeType | None = None) -> tuple[Any, list[str]]:
    """Run `call(*args)` under the profiler; the modules of its counted events, in order (up to
    the return from the first call of `until`, when given)."""
    events: list[str] = []
    state = {"first": True, "done": False}

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if state["done"]:
            return
        if event == "return" and until is not None and frame.f_code is until:
            state["done"] = True
            return
        if event != "call":
            return
        if state["first"]:
            module = _module(frame)
            if not module.startswith("pal_slurm."):
                return  # not the call itself: a collector callback (hypothesis keeps one) ran first
            state["first"] = False
        else:
            module = _counted(frame)
        if module is not None:
            events.append(module)

    sys.setprofile(profile)
    try:
        result = call(*args)
    finally:
        sys.setprofile(None)
    return result, events


def stops(events: list[str]) -> list[str]:
    out: list[str] = []
    for module in events:
        if not out or out[-1] != module:
            out.append(module)
    return out


def reentries(path: list[str]) -> int:
    return len(path) - len(set(path))


def show(name: str, path: list[str]) -> None:
    short = [m.removeprefix("pal_slurm.") for m in path]
    print(f"{name}: {len(path)} stops, {len(set(path))} modules, {reentries(path)} re-entries")
    print("  " + " -> ".join(short))


def make_pald(tmp_path: Any, jobs: list[Any]) -> tuple[Pald, ShowJobRunner]:
    cfg = Config(daemon=DaemonConfig(socket=str(tmp_path / "pald.sock"), heartbeat_file=str(tmp_path / "hb")),
                 metrics=MetricsConfig(listen=""))
    runner = ShowJobRunner()
    reader = FakeReader([node_info(f"gpu{i:02d}") for i in range(1, 5)], jobs)
    return Pald(cfg, None, reader, SlurmActuator(runner)), runner


def test_a_place_request_from_the_socket_handler_to_its_reply(tmp_path: Any) -> None:
    pald, _ = make_pald(tmp_path, [])
    pald.sync_and_cycle()
    handler, settle, _http = with_metrics(pald.config, pald)  # what the socket server calls
    req = request("resnet", gpn=2, rid="path")
    handler(request("resnet", gpn=1, rid="warm"))  # first-call caches are not the path
    reply, events = follow(handler, req)
    assert reply.decision is DecisionKind.PLACE
    path = stops(events)
    show("place", path)
    assert path[0] == "pal_slurm.daemon.requests"
    assert not {"pal_slurm.daemon.app", "pal_slurm.daemon.state"} & set(path)  # the assembly is not on it
    assert len(path) <= PLACE_MAX_STOPS, path
    assert reentries(path) <= PLACE_MAX_REENTRIES, path


def test_a_held_job_from_the_cycle_to_the_actuators_start(tmp_path: Any) -> None:
    pald, runner = make_pald(tmp_path, [held_job(7, gpn=2)])
    held = pald.sync()
    assert held
    _, events = follow(pald.held_cycle.run, held, until=SlurmLauncher.start.__code__)
    assert any(a[:2] == ["scontrol", "release"] for a in runner.argvs)  # it did reach Slurm
    path = stops(events)
    show("cycle", path)
    assert path[0] == "pal_slurm.daemon.cycle"
    assert "pal_slurm.daemon.app" not in path
    assert path[-2:] == ["pal_slurm.daemon.launcher", "pal_slurm.slurm.actuator"]
    assert len(path) <= CYCLE_MAX_STOPS, path
    assert reentries(path) <= CYCLE_MAX_REENTRIES, path
