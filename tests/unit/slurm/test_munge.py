"""What `unmunge --numeric` prints, read into what pald checks."""

from __future__ import annotations

import pytest

from pal_slurm.slurm.munge import MungeError, parse_unmunge

OK = (b"STATUS:          0\nENCODE_HOST:     10.1.2.3\nENCODE_TIME:     1796590197\n"
      b"DECODE_TIME:     1796590197\nTTL:             300\nCIPHER:          4\nMAC:             5\n"
      b"ZIP:             0\nUID:             0\nGID:             0\nLENGTH:          8\n\n{\"v\":1}\n\n")


def test_parse_reads_uid_gid_host_and_the_payload_byte_for_byte():
    d = parse_unmunge(OK)
    assert (d.uid, d.gid, d.encode_host) == (0, 0, "10.1.2.3")
    assert d.payload == b'{"v":1}\n\n'


def test_parse_refuses_a_status_other_than_zero():
    with pytest.raises(MungeError, match="15"):
        parse_unmunge(OK.replace(b"STATUS:          0", b"STATUS:          15"))


@pytest.mark.parametrize("out", [b"STATUS: 0\nUID: 0\n", OK.replace(b"UID:             0\n", b""),
                                 OK.replace(b"GID:             0", b"GID:             root")])
def test_parse_refuses_missing_or_unusable_metadata(out):
    with pytest.raises(MungeError):
        parse_unmunge(out)
