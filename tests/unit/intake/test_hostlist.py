"""Hostlist expansion and compression (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from pal_slurm.slurm.errors import HostlistError, HostlistTooLarge, SlurmError
from pal_slurm.intake.hostlist import (
    MAX_HOSTLIST_CHARS,
    MAX_HOSTLIST_ITEMS,
    MAX_PRODUCT_ITEMS,
    HostSet,
    compress,
    expand,
)


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


# ---- HostSet: membership without expansion ----------------------------------------------
_literal = st.sampled_from(["", "n", "gpu", "a-", "x1", "b"])


@st.composite
def _ranges_text(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        lo = draw(st.integers(0, 30))
        width = draw(st.integers(1, 3))
        hi = lo + draw(st.integers(0, 12))
        single = draw(st.booleans())
        parts.append(f"{lo:0{width}d}" if single else f"{lo:0{width}d}-{hi}")
    return ",".join(parts)


@st.composite
def _expressions(draw) -> str:
    items = []
    for _ in range(draw(st.integers(1, 4))):
        text = draw(_literal)
        for _ in range(draw(st.integers(0, 3))):
            text += f"[{draw(_ranges_text())}]" + draw(_literal)
        items.append(text or "h")
    return ",".join(items)


_probe = st.builds(lambda a, n, w, b, c, m: f"{a}{n:0{w}d}{b}{m:0{w}d}{c}",
                   _literal, st.integers(0, 45), st.integers(1, 3), _literal, _literal, st.integers(0, 45))


@given(_expressions(), st.lists(_probe, max_size=20))
def test_hostset_agrees_with_expand(expr: str, probes: list[str]) -> None:
    """One vocabulary: a name is in the HostSet exactly when `expand` lists it."""
    names = expand(expr)
    hosts = HostSet.from_expr(expr)
    assert all(name in hosts for name in names), expr
    for probe in probes + [n + "0" for n in names[:5]] + [n[:-1] for n in names[:5]]:
        assert (probe in hosts) == (probe in names), (expr, probe)


@pytest.mark.parametrize(
    "expr, inside, outside",
    [
        ("gpu[01-10]", ["gpu01", "gpu10"], ["gpu1", "gpu001", "gpu11", "gpu"]),
        ("n[8-10]", ["n8", "n10"], ["n08", "n7", "n11"]),
        ("n[0-999999999999]", ["n0", "n999999999999", "n5000000"], ["n1000000000000", "n05"]),
        ("a[0-999]b[0-1999]", ["a5b1999", "a999b0"], ["a1000b1", "a5b2000", "a5", "b5"]),
        ("rack[1-2]-gpu[01-04],login", ["rack2-gpu04", "login"], ["rack3-gpu01", "rack1-gpu4"]),
        ("n1[0-5]", ["n10", "n15"], ["n1", "n16"]),
        ("", [], ["n1", ""]),
        ("(null)", [], ["(null)"]),
    ],
)
def test_hostset_membership(expr: str, inside: list[str], outside: list[str]) -> None:
    hosts = HostSet.from_expr(expr)
    assert all(n in hosts for n in inside) and not any(n in hosts for n in outside)
    assert bool(hosts) == bool(inside)


def test_hostset_reads_hostile_lists_without_listing_them() -> None:
    """What expansion cannot afford: a million names in 109 bytes, 64 KiB of ranges."""
    ten = HostSet.from_expr(",".join(["n[0-99999]"] * 10))
    assert "n99999" in ten and "n100000" not in ten and ten.size_bound == 1_000_000
    with pytest.raises(HostlistTooLarge):
        ten.hosts()
    distinct = ",".join(f"n[{i * 10}-{i * 10 + 4}]" for i in range(4000))
    assert len(distinct) <= MAX_HOSTLIST_CHARS
    hosts = HostSet.from_expr(distinct)
    assert "n39994" in hosts and "n39995" not in hosts and "n3" in hosts and "n7" not in hosts
    singles = HostSet.from_expr(",".join(f"x{i}" for i in range(10_000)))
    assert "x9999" in singles and "x10000" not in singles


@pytest.mark.parametrize(
    "expr",
    [
        "n" * (MAX_HOSTLIST_CHARS + 1),
        ",".join("a" for _ in range(MAX_HOSTLIST_ITEMS + 1)),
        "a[1]b[1]c[1]d[1]e[1]",
        ",".join(f"a[{i}]b[1]" for i in range(MAX_PRODUCT_ITEMS + 1)),
        "n[1234567890123456789]",
    ],
)
def test_hostset_caps(expr: str) -> None:
    with pytest.raises(HostlistTooLarge):
        HostSet.from_expr(expr)


def test_expand_counts_before_listing() -> None:
    """The size is known from the ranges: refused before one name is made."""
    with pytest.raises(HostlistTooLarge):
        expand("a[0-999]b[0-1999]")
    assert len(expand("n[1-65536]")) == 65_536
    assert expand("n[1-3]", limit=3) == ["n1", "n2", "n3"]
    with pytest.raises(HostlistTooLarge):
        expand("n[1-3]", limit=2)


def test_hostset_equality_and_errors() -> None:
    assert HostSet.from_expr("n[1-2]") == HostSet.from_expr(" n[1-2] ")
    assert HostSet.from_expr(None) == HostSet() and not HostSet()
    with pytest.raises(HostlistError, match="unclosed"):
        HostSet.from_expr("n[1-2")
    with pytest.raises(HostlistError) as caught:
        HostSet.from_expr("n[" + "1," * 30000)
    assert len(str(caught.value)) < 200  # error messages never quote a whole hostile list
