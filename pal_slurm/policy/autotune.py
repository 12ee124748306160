"""Auto-tuner for delay-scheduling timers: pure state in, state out.

Delay scheduling (netaware) makes a job wait up to a timer for a consolidated placement (one
node, then one rack) before it accepts a spread one. Too short a timer wastes consolidation
(the job pays communication slowdown); too long a timer wastes queueing time. The tuner sets,
per (network-sensitivity class, level), a timer from recent outcomes:

- `wait` samples: how long jobs that *got* the level had waited for it ("how long a slot at
  this level usually takes to appear"); the wanted timer is mean + 2 sd of them (Dally's rule);
- `loss` samples: the communication seconds lost by jobs that *missed* the level (their
  placement's runtime minus the consolidated one's); waiting longer than consolidation would
  save is a loss, so the timer is capped at their median;
- the timer moves a fraction `alpha` toward min(wanted, cap), clamped to [min_s, max_s].

Windows keep the last `window` samples per key, so a stationary input gives a constant target
and the timers converge geometrically. The same functions run in the simulator (after each
placement) and in pald (after each release), with the state kept by the caller.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Hashable, TypeVar

from pal_slurm.model.network import LEVELS, SENSITIVITIES, DelayTimers

_K = TypeVar("_K", bound=Hashable)


# Seconds a job waits for each level before accepting the next one, by network sensitivity.
DEFAULT_TIMERS: DelayTimers = {
    ("high", "node"): 600.0,
    ("high", "rack"): 1800.0,
    ("medium", "node"): 120.0,
    ("medium", "rack"): 600.0,
    ("low", "node"): 0.0,
    ("low", "rack"): 0.0,
}


def rack_timers(rack_wait_s: float) -> dict[tuple[str, str], float]:
    """Rack timers for a site's `rack_wait_s` (a medium-sensitivity job's wait for one rack):
    the other sensitivities scale as the defaults do (low 0x, high 3x)."""
    base = DEFAULT_TIMERS[("medium", "rack")]
    return {(s, "rack"): rack_wait_s * DEFAULT_TIMERS[(s, "rack")] / base for s in SENSITIVITIES}


@dataclass(frozen=True)
class TunerConfig:
    window: int = 64  # samples kept per (sensitivity, level)
    alpha: float = 0.25  # step toward the target per observation
    min_s: float = 0.0
    max_s: float = 3600.0

    def __post_init__(self) -> None:
        if self.window <= 0 or not 0.0 < self.alpha <= 1.0 or not 0.0 <= self.min_s <= self.max_s:
            raise ValueError("tuner needs window > 0, 0 < alpha <= 1 and 0 <= min_s <= max_s")


@dataclass(frozen=True)
class Observation:
    """One job placement, as the tuner sees it."""

    sensitivity: str  # low / medium / high
    wanted: int  # most consolidated tier the job could get (0 node, 1 rack, 2 spine)
    got: int  # tier it got
    waited_s: float  # seconds it waited before this placement
    comm_loss_s: float  # estimated seconds lost against the consolidated placement (>= 0)
    time: float = 0.0


@dataclass(frozen=True)
class TunerState:
    timers: tuple[tuple[tuple[str, str], float], ...]
    waits: tuple[tuple[tuple[str, str], tuple[float, ...]], ...] = ()
    losses: tuple[tuple[tuple[str, str], tuple[float, ...]], ...] = ()
    updates: int = 0

    def timer(self, sensitivity: str, level: str) -> float:
        return dict(self.timers).get((sensitivity, level), 0.0)


def initial_state(config: TunerConfig = TunerConfig(), timers: DelayTimers | None = None) -> TunerState:
    base = dict(DEFAULT_TIMERS)
    base.update(timers or {})
    clamped = {k: min(config.max_s, max(config.min_s, float(v))) for k, v in base.items()}
    return TunerState(tuple(sorted(clamped.items())))


def timers(state: TunerState) -> dict[tuple[str, str], float]:
    """The current timers {(sensitivity, level): seconds}."""
    return dict(state.timers)


def _push(samples: dict[_K, tuple[float, ...]], key: _K, value: float, window: int) -> None:
    samples[key] = (samples.get(key, ()) + (float(value),))[-window:]


def target(waits: tuple[float, ...], losses: tuple[float, ...], config: TunerConfig) -> float | None:
    """The timer the samples call for; None when there is no evidence yet."""
    if not waits and not losses:
        return None
    wanted = config.max_s
    if waits:
        wanted = statistics.fmean(waits) + 2.0 * (statistics.pstdev(waits) if len(waits) > 1 else 0.0)
    cap = statistics.median(losses) if losses else config.max_s
    return min(config.max_s, max(config.min_s, min(wanted, cap)))


def observe(state: TunerState, obs: Observation, config: TunerConfig = TunerConfig()) -> TunerState:
    """The state after one observation (the input state is not changed)."""
    waits = dict(state.waits)
    losses = dict(state.losses)
    cur = dict(state.timers)
    touched = []
    for tier, level in enumerate(LEVELS):
        if obs.wanted > tier:
            continue  # the job could never have had this level
        key = (obs.sensitivity, level)
        if obs.got <= tier:
            _push(waits, key, max(0.0, obs.waited_s), config.window)
        else:
            _push(losses, key, max(0.0, obs.comm_loss_s), config.window)
        touched.append(key)
    for key in touched:
        goal = target(waits.get(key, ()), losses.get(key, ()), config)
        if goal is None:
            continue
        old = cur.get(key, 0.0)
        cur[key] = min(config.max_s, max(config.min_s, old + config.alpha * (goal - old)))
    return TunerState(
        tuple(sorted(cur.items())),
        tuple(sorted(waits.items())),
        tuple(sorted(losses.items())),
        state.updates + 1,
    )
