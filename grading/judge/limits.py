"""The limit on one test of a kata run: TEST_LIMIT seconds on the clock (pytest-timeout), and the
timers that enforce a test's limits (`arm`, `disarm`): a test that hangs fails alone, saying it
did not finish, and the kata's other tests keep running. TEST_LIMIT is far above what the
slowest test of any reference takes on a busy 2-core machine. While grading, the limits in CPU
time come from `grading/grade/limits.py`.
"""

from __future__ import annotations

import signal

TEST_LIMIT = 600.0  # wall-clock seconds one test of a kata run may take


class TestTimedOut(BaseException):
    """A test past its limit. Not an Exception: Hypothesis lets it through instead of running
    the example again to shrink it (which would hang again), and `except Exception` in the code
    under test does not swallow it."""

    __test__ = False  # not a test class, whatever its name says


def arm(which: int, seconds: float, message: str) -> None:
    """Raise TestTimedOut(message) once `seconds` pass on `which` clock (signal.ITIMER_REAL: the
    wall clock; ITIMER_PROF: this process's CPU time). Code that swallows it meets the run's
    backstop instead."""
    sig = signal.SIGALRM if which == signal.ITIMER_REAL else signal.SIGPROF

    def stop(signum, frame) -> None:
        raise TestTimedOut(message)

    signal.signal(sig, stop)
    signal.setitimer(which, seconds)


def disarm(which: int) -> None:
    signal.setitimer(which, 0)
    signal.signal(signal.SIGALRM if which == signal.ITIMER_REAL else signal.SIGPROF, signal.SIG_DFL)


def timed_out(limit: float, unit: str) -> str:
    return (
        f"timed out: the test did not finish within {limit:g} s{unit} (the limit of each test). "
        "A loop that never ends, or work far beyond what the task needs?"
    )
