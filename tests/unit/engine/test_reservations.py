"""The book of pald's promises (pal_slurm.engine.reservations): what a booking takes from the
free GPUs and the shape index, the CPUs/memory it promises, and when a read ends it."""

from __future__ import annotations

from pal_slurm.engine.reservations import Reservations
from pal_slurm.intake.restrictions import JobRestrictions
from pal_slurm.model import ClusterView, JobShape
from pal_slurm.policy.shapes import ShapeIndex

VIEW = ClusterView.from_layout([("gpu01", 4), ("gpu02", 4)])


def test_a_booking_leaves_the_free_set_and_the_index_in_step():
    book = Reservations()
    index = book.index(VIEW)
    book.reserve("job:1", (0, 1), now=0.0)
    assert book.available(VIEW).free == VIEW.free - {0, 1}
    assert index.free == book.available(VIEW).free  # the index took the same GPUs, in place
    book.drop("job:1")
    assert book.available(VIEW).free == VIEW.free


def test_cpus_and_memory_promised_add_up_per_node_and_a_user_is_crowded_at_the_cap():
    book = Reservations(per_user_max=2)
    need = JobRestrictions(cpus_per_node=4, memory_per_node_mb=1000)
    book.reserve("req:a", (0,), 0.0, need, ("gpu01",), user=7)
    assert not book.crowded(7)
    book.reserve("req:b", (4,), 0.0, need, ("gpu01", "gpu02"), user=7)
    assert book.promised() == {"gpu01": (8, 2000), "gpu02": (4, 1000)}
    assert book.crowded(7) and not book.crowded(8)


def test_a_read_ends_a_booking_it_confirms_or_that_outlived_its_ttl():
    book = Reservations()
    book.reserve("job:1", (0,), 0.0)
    book.reserve("job:2", (5,), 0.0)
    book.observe(VIEW.with_free(VIEW.free - {0}), 1.0, (), None, None, grace_s=2.0, ttl_s=30.0)
    assert set(book.by_key) == {"job:2"}  # its GPU looks busy: Slurm started it
    book.observe(VIEW, 40.0, (), None, None, grace_s=2.0, ttl_s=30.0)
    assert not book.by_key


def test_the_index_follows_reads_and_dropped_bookings_as_one_built_afresh():
    """The index is kept across a read and a dropped booking of the same layout (rebuilding
    it cost the first request after each read a sort of every free GPU): it is moved onto
    the new free set, and picks as an index built on it does."""
    book = Reservations()
    book.reserve("a", [0, 1], now=0.0)
    book.reserve("b", [4], now=0.0)
    index = book.index(VIEW)
    sf = (1.0,) * VIEW.size
    assert index.pick(JobShape.on_nodes(1, 2), sf) == (2, 3)  # the class's index exists
    book.drop("a")
    assert book.index(VIEW) is index and index.free == VIEW.free - {4}
    read = VIEW.with_free(VIEW.free - {2, 3, 5})  # a job started on gpu01's 2-3 and gpu02's 5
    book.observe(read, now=1.0, started=(), in_queue=None, queue_read_at=None, grace_s=2.0, ttl_s=30.0)
    assert book.index(read) is index and index.free == read.free - {4}
    fresh = ShapeIndex(read.with_free(read.free - {4}))
    for g in (1, 2, 3):
        assert index.pick(JobShape.on_nodes(1, g), sf) == fresh.pick(JobShape.on_nodes(1, g), sf)


def test_clearing_the_book_keeps_the_index_and_settling_moves_it_onto_the_read():
    """Every booking dropped at once (same layout) leaves the index kept, moved onto the free
    GPUs when the owner settles it after a read; it then picks as one built afresh."""
    book = Reservations()
    index = book.index(VIEW)
    sf = (1.0,) * VIEW.size
    index.pick(JobShape.on_nodes(1, 2), sf)  # the class's index exists
    book.reserve("a", [0, 1], now=0.0)
    book.reserve("b", [4, 5, 6], now=0.0)
    book.clear()
    read = VIEW.with_free(VIEW.free - {2})
    book.settle(read)
    assert book._index is index and not book._index_behind  # moved now, not at the next request
    assert index.free == read.free == book.available(read).free
    fresh = ShapeIndex(read)
    for g in (1, 2, 3, 4):
        assert index.pick(JobShape.on_nodes(1, g), sf) == fresh.pick(JobShape.on_nodes(1, g), sf)


def test_a_new_layout_or_ranking_drops_the_index():
    book = Reservations()
    index = book.index(VIEW)
    book.changed()
    assert book.index(VIEW) is not index


def summed(book: Reservations) -> dict[str, tuple[int, int]]:
    """The CPUs and memory promised per node, summed afresh over the reservations."""
    out: dict[str, tuple[int, int]] = {}
    for r in book.by_key.values():
        for node, (cpus, memory) in r.promised.items():
            had = out.get(node, (0, 0))
            out[node] = (had[0] + cpus, had[1] + memory)
    return out


def test_the_promised_cpus_and_memory_kept_per_node_are_the_sum_over_the_reservations():
    """`promised` is kept as reservations are made, made again under the same key, dropped,
    ended by reads and cleared: after each step it is the sum over the reservations left,
    nodes promised nothing by any (even a reservation of 0 CPUs and 0 MB) left out."""
    import random

    rng = random.Random(4)
    book = Reservations()
    for step in range(400):
        what = rng.choice(["reserve"] * 5 + ["drop", "observe", "clear"] * 1)
        key = f"k{rng.randrange(12)}"
        if what == "reserve":
            need = JobRestrictions(cpus_per_node=rng.choice([0, 1, 4]), memory_per_node_mb=rng.choice([0, 500]))
            nodes = rng.sample(["gpu01", "gpu02"], rng.randint(0, 2))
            book.reserve(key, rng.sample(range(VIEW.size), 1), float(step), need if rng.random() < 0.8 else None,
                         nodes)
        elif what == "drop":
            book.drop(key)
        elif what == "observe" and rng.random() < 0.3:  # a read that confirms some and lets others outlive their ttl
            book.observe(VIEW.with_free(rng.sample(range(VIEW.size), 4)), float(step), (key,), None, None,
                         grace_s=2.0, ttl_s=30.0)
        elif what == "clear" and rng.random() < 0.1:
            book.clear()
        assert book.promised() == summed(book), step
    assert Reservations(by_key=dict(book.by_key)).promised() == summed(book)  # one made with reservations
