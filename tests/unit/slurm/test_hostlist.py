"""Hostlist expansion and compression (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from pal_slurm.slurm.errors import HostlistError, SlurmError
from pal_slurm.slurm.hostlist import compress, expand


@pytest.mark.parametrize(
    "expr, names",
    [
        ("gpu01", ["gpu01"]),
        ("gpu[01-04,07]", ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
        ("gpu[01-02],cpu[1-2],login", ["gpu01", "gpu02", "cpu1", "cpu2", "login"]),
        ("gpu[02,01,02]", ["gpu02", "gpu01"]),
        ("", []),
        ("(null)", []),
        ("rack[1-2]-gpu[1-2]", ["rack1-gpu1", "rack1-gpu2", "rack2-gpu1", "rack2-gpu2"]),
    ],
)
def test_expand(expr: str, names: list[str]) -> None:
    assert expand(expr) == names


@pytest.mark.parametrize(
    "expr, message",
    [
        ("gpu[01-04", "unclosed"),
        ("gpu01-04]", "unbalanced"),
        ("gpu[04-01]", "descending"),
        ("gpu[a-b]", "bad range"),
        ("gpu[1-]", "bad range"),
        ("gpu[]", "bad range"),
        ("gpu01,,gpu02", "empty element"),
        ("gpu[[1-2]]", "nested"),
        ("gpu01 gpu02", "whitespace"),
        ("n[0-99999999]", "too large"),
    ],
)
def test_expand_rejects_malformed(expr: str, message: str) -> None:
    with pytest.raises(HostlistError, match=message):
        expand(expr)


def test_hostlist_error_is_a_slurm_error_and_value_error() -> None:
    with pytest.raises(SlurmError):
        expand("x[")
    with pytest.raises(ValueError):
        expand("x[")


@pytest.mark.parametrize(
    "names, expr",
    [
        (["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"], "gpu[01-04,07]"),
        (["gpu03", "gpu01", "gpu02", "gpu01"], "gpu[01-03]"),
        (["gpu01"], "gpu01"),
        (["n9", "n10"], "n9,n10"),
        (["login", "gpu02", "gpu01"], "gpu[01-02],login"),
        ([], ""),
    ],
)
def test_compress(names: list[str], expr: str) -> None:
    assert compress(names) == expr


@pytest.mark.parametrize("bad", ["", "a,b", "a[1]", "a b"])
def test_compress_rejects_unrepresentable_names(bad: str) -> None:
    with pytest.raises(HostlistError):
        compress([bad])


_names = st.builds(
    lambda prefix, n, width: f"{prefix}{n:0{width}d}",
    st.sampled_from(["gpu", "n", "rack1-node", "x"]),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=1, max_value=4),
) | st.sampled_from(["login", "head"])


@given(st.lists(_names, max_size=40))
def test_compress_then_expand_round_trips(names: list[str]) -> None:
    assert sorted(expand(compress(names))) == sorted(set(names))
