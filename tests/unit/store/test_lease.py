"""The leadership lease (store/lease.py): a store outage does not switch PAL off, and two
leaders never act at once. Pure logic: checks and times are handed in."""

from pal_slurm.store.lease import Lease, LockCheck, LockState

HELD, TAKEN, DOWN = LockState.HELD, LockState.TAKEN, LockState.UNREACHABLE


def test_an_outage_costs_no_leadership_when_no_other_pald_is_connected():
    lease = Lease(grace_s=60)
    assert lease.observe(LockCheck(HELD, peers=0), 0)
    for t in range(1, 3600, 7):  # an hour without the database
        assert lease.observe(LockCheck(DOWN, error="connection refused"), t)
        assert lease.leading_at(t + 3)
    assert "no other pald" in lease.reason
    assert lease.observe(LockCheck(HELD, peers=0), 3600)


def test_with_a_standby_connected_the_leader_leads_on_for_the_grace_then_steps_down():
    lease = Lease(grace_s=60)
    assert lease.observe(LockCheck(HELD, peers=1), 0)
    assert lease.observe(LockCheck(DOWN), 30)
    assert lease.leading_at(59.9) and not lease.leading_at(60.1)  # a stuck check ages out too
    assert not lease.observe(LockCheck(DOWN), 61)
    assert lease.observe(LockCheck(HELD, peers=1), 70)  # the lock is still ours: lead again


def test_a_leader_that_sees_the_lock_taken_steps_down_at_once():
    lease = Lease(grace_s=60)
    lease.observe(LockCheck(HELD, peers=0), 0)
    assert not lease.observe(LockCheck(TAKEN, peers=1), 1)
    assert not lease.leading_at(2)


def test_a_takeover_after_seeing_another_leader_waits_out_the_old_leaders_grace():
    standby = Lease(grace_s=60)
    assert not standby.observe(LockCheck(TAKEN, peers=1), 0)  # the active pald is there
    assert not standby.observe(LockCheck(HELD, peers=0), 10)  # its session vanished: lock is ours
    assert "grace" in standby.reason
    assert not standby.observe(LockCheck(HELD, peers=0), 69)
    assert standby.observe(LockCheck(HELD, peers=0), 70)


def test_no_two_leaders_when_the_old_leader_is_only_cut_off_from_the_database():
    """The old leader (a standby was connected) cannot reach the database; the standby can."""
    old, new = Lease(grace_s=60), Lease(grace_s=60)
    old.observe(LockCheck(HELD, peers=1), 0)
    new.observe(LockCheck(TAKEN, peers=1), 0)
    for t in range(1, 200):
        old.observe(LockCheck(DOWN), t)
        new.observe(LockCheck(HELD if t >= 12 else TAKEN, peers=0), t)  # server drops old's session at 12 s
        assert not (old.leading_at(t) and new.leading_at(t)), f"two leaders at {t} s"
    assert new.leading_at(199) and not old.leading_at(199)


def test_a_first_start_leads_at_once_and_an_exact_lock_needs_no_takeover_wait():
    assert Lease(grace_s=60).observe(LockCheck(HELD, peers=0), 0)
    flock = Lease(grace_s=60, exact=True)
    flock.observe(LockCheck(TAKEN), 0)
    assert flock.observe(LockCheck(HELD), 1)


def test_an_unreachable_lock_at_start_is_standby():
    lease = Lease(grace_s=60)
    assert not lease.observe(LockCheck(DOWN, error="x"), 0)
    assert lease.reason == "lock unreachable"
