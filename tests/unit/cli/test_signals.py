"""SIGTERM/SIGHUP inside `exit_cleanly_on_termination` unwind through `finally` blocks."""

import os
import signal
import time

import pytest

from pal_slurm.cli.signals import Terminated, exit_cleanly_on_termination


def test_sigterm_raises_terminated_and_the_finally_blocks_run():
    cleaned = []
    with pytest.raises(Terminated) as caught:
        with exit_cleanly_on_termination():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises before this returns
                pytest.fail("SIGTERM did not interrupt")  # pragma: no cover
            finally:
                cleaned.append("lab stopped")
    assert cleaned == ["lab stopped"]
    assert caught.value.code == 128 + signal.SIGTERM and caught.value.name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the previous handler is back


def test_a_second_signal_during_the_clean_up_is_ignored():
    cleaned = []
    with pytest.raises(Terminated):
        with exit_cleanly_on_termination():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            finally:
                os.kill(os.getpid(), signal.SIGHUP)  # would end the process with the default handler
                cleaned.append("clean-up finished")
    assert cleaned == ["clean-up finished"]


def test_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with exit_cleanly_on_termination():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)  # nothing happens
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
