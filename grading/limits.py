"""How long a test, and a whole kata run, may take: limits that never zero correct work.

- Every test of a kata has its own limit, TEST_LIMIT seconds of wall time (pytest-timeout): a
  test that hangs fails alone, saying it did not finish, and the kata's other tests keep running.
  The slowest test of any reference takes about 25 s on a busy 2-core machine; the limit is far
  above that, so a correct solution on a loaded machine is never stopped.
- A graded run also has a backstop for the whole kata, in CPU seconds of the test process and its
  helpers (a busy machine slows the clock, not the CPU time a run needs): RUN_LIMIT_FACTOR times
  what the kata's reference needs on this machine, measured once per machine and commit and
  cached. A run stopped there keeps every test that finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from pathlib import Path

TEST_LIMIT = 600.0  # wall-clock seconds one test may take
RUN_LIMIT_FACTOR = 10.0  # the backstop, in multiples of the reference's CPU time
RUN_LIMIT_FLOOR = 120.0  # CPU seconds: never less, however quick the reference
# Wall time for a whole run, per CPU second of its backstop: only a run that sleeps or waits
# forever without using the CPU meets it (each test's own limit stops it first).
WALL_PER_CPU = 4.0


def run_limit(reference_cpu_s: float) -> float:
    """The backstop for a kata whose reference needs `reference_cpu_s` CPU seconds."""
    return max(RUN_LIMIT_FLOOR, RUN_LIMIT_FACTOR * reference_cpu_s)


def calibration_file(commit: str | None, examples: int) -> Path:
    """Where this machine's reference timings for this commit and example count are kept."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    machine = f"{platform.node()}-{platform.machine()}-{os.cpu_count()}"
    key = hashlib.sha256(f"{machine}|{commit}|{examples}".encode()).hexdigest()[:16]
    return base / "inference-katas" / "calibration" / f"{key}.json"


def cached_timings(path: Path) -> dict[str, float]:
    """{kata: the reference's CPU seconds} measured before on this machine and commit."""
    try:
        return {k: float(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def save_timings(path: Path, timings: dict[str, float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({**cached_timings(path), **timings}, indent=1) + "\n")
    partial.replace(path)
