"""Who may use a Slurm reservation (Users=, Accounts=): pald places a job on a reservation's
nodes only when both lists admit it; otherwise the job goes to Slurm untouched, promised
nothing (model.site.ReservationFacts.admits, slurm.site.parse_reservations)."""

from pal_slurm.model.site import NodeFacts, PartitionFacts, ReservationFacts, SiteView
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.policy.eligibility import eligible_nodes
from pal_slurm.slurm.site import parse_reservations

NOW = 1_000_000.0
LINE = ("ReservationName=theirs StartTime=2026-12-05T10:00:00 EndTime=2026-12-05T11:00:00 Duration=01:00:00 "
        "Nodes=gpu01 NodeCnt=1 CoreCnt=8 Features=(null) PartitionName=(null) Flags=SPEC_NODES TRES=cpu=8 "
        "Users={users} Groups={groups} Accounts={accounts} Licenses=(null) State=ACTIVE BurstBuffer=(null) "
        "Watts=n/a MaxStartDelay=(null)")
UIDS = {"root": 0, "alice": 1001, "bob": 1002}.get


def one(users="(null)", accounts="(null)", groups="(null)") -> ReservationFacts:
    return parse_reservations(LINE.format(users=users, accounts=accounts, groups=groups), UIDS)["theirs"]


def test_access_lists_are_read():
    r = one(users="root,alice,nobody-here", accounts="(null)")
    assert r.user_ids == {0, 1001} and not r.users_except and r.accounts is None  # a name without uid: left out
    r = one(users="-bob", accounts="-guests")
    assert r.user_ids == {1002} and r.users_except and r.accounts == {"guests"} and r.accounts_except
    assert one().user_ids is None and one().admits(None, None)


def test_a_job_is_admitted_only_when_every_list_admits_it():
    assert one(users="root,alice").admits(1001, None)
    assert not one(users="root").admits(1001, "lab")  # someone else's reservation
    assert not one(users="root").admits(None, None)  # unknown user: pald cannot tell
    assert not one(users="-bob").admits(1002, None) and one(users="-bob").admits(1001, None)
    assert one(accounts="lab").admits(1001, "lab") and not one(accounts="lab").admits(1001, "other")
    assert not one(accounts="lab").admits(1001, None)  # the user's default account: not known here
    assert not one(users="alice", accounts="lab").admits(1001, "other")  # both lists must admit it
    assert not one(groups="wheel").admits(0, "lab")  # Groups= is not evaluated


def test_eligibility_places_on_a_reservation_only_for_those_it_admits():
    r = one(users="alice")
    r = ReservationFacts(r.name, r.nodes, NOW - 10, NOW + 3600, True, r.user_ids, r.users_except)
    nodes = {n: NodeFacts(n, True, ("gpu",), frozenset(), 16, 16, 4000, 4000, 4) for n in ("gpu01", "gpu02")}
    view = SiteView(nodes, {"gpu": PartitionFacts("gpu", frozenset(nodes), default=True)}, {r.name: r})
    mine = eligible_nodes(JobRestrictions(reservation="theirs", uid=1001), view, NOW)
    assert mine.passed is None and set(mine.fits_now) == {"gpu01"}
    assert eligible_nodes(JobRestrictions(reservation="theirs", uid=1002), view, NOW).passed == "reservation_access"
    outside = eligible_nodes(JobRestrictions(uid=1001), view, NOW)  # not asking for it: kept off its nodes
    assert set(outside.fits_now) == {"gpu02"}
