"""How long a test, and a whole kata run, may take: limits that never zero correct work.

- Every test of a kata has its own limit, TEST_LIMIT seconds on the clock (pytest-timeout,
  `grading/judge/limits.py`).
- A graded test has a limit in CPU time (a busy machine slows the clock, not the CPU time a
  test needs): TEST_CPU_FACTOR times the slowest test of the kata's reference on this machine,
  and at least TEST_CPU_FLOOR; its limit on the clock is GRADE_TEST_LIMIT, for a test that
  waits without using the CPU.
- A graded run has a backstop for the whole kata, in CPU seconds of the test process and its
  helpers: RUN_LIMIT_FACTOR times what the kata's reference needs on this machine. A run
  stopped there keeps every test that finished.

The reference's figures are measured once per machine, commit and example count, and cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

# While grading, a test that keeps the CPU busy meets its CPU limit first; the clock's limit only
# stops one that waits forever, and a machine busy with other jobs must not meet it.
GRADE_TEST_LIMIT = 1800.0
TEST_CPU_FACTOR, TEST_CPU_FLOOR = 10.0, 30.0  # a graded test's CPU seconds
RUN_LIMIT_FACTOR, RUN_LIMIT_FLOOR = 10.0, 120.0  # a graded run's CPU seconds
# Wall time for a whole run, per CPU second of its backstop: only a run that sleeps or waits
# forever without using the CPU meets it (each test's own limit stops it first).
WALL_PER_CPU = 4.0


def limits_for(reference: dict | None) -> tuple[float, float]:
    """(CPU seconds per test, CPU seconds per run) for a kata whose reference needed
    {"test": its slowest test's, "run": the whole run's} CPU seconds (None: not measured)."""
    reference = reference or {}
    return (
        max(TEST_CPU_FLOOR, TEST_CPU_FACTOR * reference.get("test", 0.0)),
        max(RUN_LIMIT_FLOOR, RUN_LIMIT_FACTOR * reference.get("run", 0.0)),
    )


def calibration_file(commit: str | None, examples: int) -> Path:
    """Where this machine's reference timings for this commit and example count are kept."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    machine = f"{platform.node()}-{platform.machine()}-{os.cpu_count()}"
    key = hashlib.sha256(f"{machine}|{commit}|{examples}".encode()).hexdigest()[:16]
    return base / "inference-katas" / "calibration" / f"{key}.json"


def cached_timings(path: Path) -> dict[str, dict]:
    """{kata: {"test", "run"}}: the reference's CPU seconds measured before on this machine."""
    try:
        return {k: dict(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


def save_timings(path: Path, timings: dict[str, dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({**cached_timings(path), **timings}, indent=1) + "\n")
    partial.replace(path)
