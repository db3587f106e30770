"""One task of grading: one kata of one submission, in a sandbox of its own.

Plain values in and out (`grade_task(**options)`), so every backend (`backends.py`: a thread
here, a Ray task on a cluster) runs it the same way.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from grading.grade.sandbox import run_kata
from grading.judge.source_check import check_source


def grade_task(
    kata: str, file: str, parts: dict[str, str], *, seed: int, cpu_limit: float,
    test_limit: float, test_cpu: float, examples: int, select: str | None = None,
    source_check: bool = True,
) -> dict:  # fmt: skip
    """One kata of one submission in a sandbox of its own, with the submission's other katas
    (`parts`) in place of the stubs: {tests, reason, zeroed, cpu_s}. Plain values in and out, so
    any backend (a thread here, a Ray task on a cluster) runs it the same way. `select`: a
    pytest `-k` expression, to grade part of a kata. Files the source check refuses never run
    (`source_check=False` skips it, to test the sandbox's own defences)."""
    if source_check:
        if refused := check_source(Path(file), kata):
            reason = f"refused by the source check: {'; '.join(refused)}"
            return dict(tests=[], reason=reason, zeroed=True, cpu_s=0.0)
        # The submission's other files stand in for their stubs only when they pass the check
        # themselves; a refused one counts against its own kata, and against this one only if
        # this kata's file imports it.
        refused_parts = {k for k, f in parts.items() if f != file and check_source(Path(f), k)}
        text = Path(file).read_text()
        if used := sorted(k for k in refused_parts if f"katas.{k}.solution" in text):
            names = ", ".join(f"katas.{k}.solution" for k in used)
            reason = f"refused by the source check: this file imports {names}, which is refused"
            return dict(tests=[], reason=reason, zeroed=True, cpu_s=0.0)
        parts = {k: f for k, f in parts.items() if k not in refused_parts}
    with tempfile.TemporaryDirectory(prefix=f"grade-{kata}-") as tmp:
        run = run_kata(
            kata, Path(file), Path(tmp) / "run", seed=seed, cpu_limit=cpu_limit,
            test_limit=test_limit, test_cpu=test_cpu, examples=examples, select=select,
            parts={k: Path(v) for k, v in parts.items()},
        )  # fmt: skip
    return dict(tests=run.tests, reason=run.reason, zeroed=run.zeroed, cpu_s=round(run.cpu_s, 1))
