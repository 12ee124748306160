"""A round's free GPUs (policy.free.FreeGpus) against a plain set, through takes of a few GPUs
(cleared one by one) and of many (cleared by one indexed write), and gives."""

from __future__ import annotations

import random

import pytest

from pal_slurm.policy.free import FreeGpus


@pytest.mark.parametrize("seed", range(20))
def test_takes_and_gives_of_any_size_keep_every_form_equal_to_a_plain_set(seed):
    rnd = random.Random(seed)
    size = 64
    plain = set(rnd.sample(range(size), rnd.randint(0, size)))
    free = FreeGpus(size, plain)
    if seed % 2:
        free.ids()  # the id list kept in step from the start
    for _ in range(30):
        if plain and rnd.random() < 0.7:
            gone = rnd.sample(sorted(plain), rnd.randint(1, min(len(plain), 20)))  # a few, or more than 8
            free.take(gone)
            plain.difference_update(gone)
        else:
            back = rnd.sample(sorted(set(range(size)) - plain), rnd.randint(0, min(size - len(plain), 5)))
            free.give(back)
            plain.update(back)
        assert len(free) == len(plain)
        assert set(map(int, free.mask.nonzero()[0])) == plain
        assert free.ids() == sorted(plain) and free.array().tolist() == sorted(plain)
