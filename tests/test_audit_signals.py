"""How the audit stops (``audit.signals``): SIGINT and SIGTERM unwind, and the first one's cleanup is not cut short.

Real signals sent to this process (``os.kill``), inside :func:`signals_unwind`: SIGINT raises
``KeyboardInterrupt`` and SIGTERM ``Terminated``; once one has arrived, a second one (a second Ctrl-C, or
the SIGTERM that Snakemake sends to its jobs after a Ctrl-C reached them) is ignored until the block ends,
so that the temporary folder is removed; a signal the process ignored before the block stays ignored, and
the previous handlers come back after it.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from disaggregated_eval.audit.signals import Terminated, signals_unwind


@pytest.fixture
def default_handlers():
    """Python's own handlers for the test (a test runner may ignore SIGINT), the runner's afterwards."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    yield
    for sig, handler in previous.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize(
    ("first", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated), (signal.SIGHUP, Terminated)]
)
def test_the_first_signal_unwinds_and_a_second_cannot_cut_the_cleanup_short(default_handlers, first, raised):
    cleaned = []
    with pytest.raises(raised), signals_unwind():
        try:
            os.kill(os.getpid(), first)
            time.sleep(10)  # interrupted: the handler raises as soon as the signal arrives
            pytest.fail("the signal did not unwind")
        finally:
            os.kill(os.getpid(), signal.SIGINT)  # the second signal, in the cleanup: ignored
            os.kill(os.getpid(), signal.SIGTERM)
            cleaned.append(True)
    assert cleaned == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored after the block
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_signal_ignored_before_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # nohup, a background job of a shell
    try:
        with signals_unwind():
            os.kill(os.getpid(), signal.SIGINT)
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
