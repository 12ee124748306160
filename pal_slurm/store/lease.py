"""Leadership as a lease on the store's lock: a store outage does not switch PAL off.

The lock (leader.py: a PostgreSQL advisory lock, a file lock) says who may lead while the lock
can be checked. When it cannot (the database is down or frozen), a rule of "no confirmed
lock, no leadership" would send the only pald to standby and every job would pass unplaced.
The rules here (why: docs/decisions/leadership.md), pure logic with the time passed in:

- a leader that cannot check its lock keeps leading for `grace_s` after its last confirmed
  check; when that check saw no other pald connected (`peers == 0`), for as long as the
  outage lasts: nobody else can take over then;
- a leader that sees the lock taken by another steps down at once;
- a pald that acquires the lock after having seen another leader waits `grace_s` before it
  acts, so the old one has stepped down by its own rule even if it was only cut off from the
  database (not dead); a pald that never saw another leader acts at once. Locks whose holder
  cannot be cut off from them while alive (a local flock: `exact`) need no such wait.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class LockState(enum.Enum):
    HELD = "held"  # we hold the lock (checked just now)
    TAKEN = "taken"  # another contender holds it
    UNREACHABLE = "unreachable"  # cannot tell: the lock's backend is away


@dataclass(frozen=True)
class LockCheck:
    state: LockState
    peers: int | None = None  # other contenders connected right now (None: unknown)
    error: str = ""


@dataclass
class Lease:
    grace_s: float
    exact: bool = False  # the lock cannot outlive its holder's reach (flock): no takeover wait
    leading: bool = False
    confirmed_at: float | None = None  # last check that saw the lock HELD while leading
    sole: bool = False  # that check saw no other pald connected
    acquired_at: float | None = None  # when a takeover began (lock held, not yet acting)
    saw_other_leader: bool = False
    reason: str = "not checked yet"

    def observe(self, check: LockCheck, now: float) -> bool:
        """Fold one lock check in; returns whether we lead now."""
        if check.state is LockState.TAKEN:
            self.saw_other_leader = True
            self.leading, self.acquired_at = False, None
            self.reason = "another pald holds the lock"
        elif check.state is LockState.HELD:
            if not self.leading:
                if self.acquired_at is None:
                    self.acquired_at = now
                wait = self.grace_s if self.saw_other_leader and not self.exact else 0.0
                if now - self.acquired_at >= wait:
                    self.leading, self.acquired_at = True, None
                else:
                    self.reason = f"took the lock; acting in {wait - (now - self.acquired_at):.0f} s (grace)"
            if self.leading:
                self.confirmed_at = now
                self.sole = check.peers == 0
                self.reason = "holds the lock"  # also after leading on through an outage
        else:
            self.acquired_at = None  # a takeover in progress starts over once the lock is back
            self.leading = self.leading_at(now)
            if self.leading:
                self.reason = ("lock unreachable; leading on (no other pald)" if self.sole
                               else "lock unreachable; leading on within the grace period")
            else:
                self.reason = "lock unreachable" + (f" for more than {self.grace_s:g} s" if self.confirmed_at else "")
        return self.leading

    def leading_at(self, now: float) -> bool:
        """Whether we still lead at `now` with no newer check (a check may be stuck)."""
        return self.leading and now < self.lead_until()

    def lead_until(self) -> float:
        """Time after which, with no newer check, we stop leading (inf: no limit)."""
        if not self.leading or self.confirmed_at is None or self.sole:
            return math.inf
        return self.confirmed_at + self.grace_s
