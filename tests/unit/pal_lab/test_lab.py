"""Pure parts of the lab helper (the lab itself is exercised by tests/integration)."""

from __future__ import annotations

import socket

import pytest

from pal_lab.lab import LAB_SCRIPT, LabError, ephemeral_port_low, free_port_block, start_lab


def test_free_port_block_is_bindable() -> None:
    base = free_port_block(5)
    socks = []
    try:
        for port in range(base, base + 5):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the lab's daemons bind
            s.bind(("127.0.0.1", port))
            socks.append(s)
    finally:
        for s in socks:
            s.close()
    assert len(socks) == 5
    assert base + 5 <= ephemeral_port_low()  # no outgoing connection takes one meanwhile


def test_lab_script_is_shipped_and_executable() -> None:
    assert LAB_SCRIPT.is_file()
    assert LAB_SCRIPT.stat().st_mode & 0o111


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"hook": "/nonexistent/job_submit.lua"}, "hook /nonexistent/job_submit.lua: no such file"),
        ({"prolog": "/nonexistent/prolog.sh"}, "prolog"),
        ({"gres": "fancy"}, "typed"),
    ],
)
def test_start_lab_rejects_bad_arguments_before_starting(tmp_path, kwargs, message) -> None:
    with pytest.raises(LabError, match=message):
        start_lab(tmp_path / "lab", **kwargs)
    assert not (tmp_path / "lab").exists()
