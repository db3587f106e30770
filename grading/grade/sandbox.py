"""Run one kata's tests on one submitted file, isolated, and say what happened.

Each run gets a fresh copy of the repository's katas, harness and references (without the kata's
own reference) in a folder of its own, a process group of its own with limits on memory, file
size and time, and its own HOME and TMPDIR. The grader reads only the results file that
`grading.grade.plugin` writes; the submission's exit code and printed output are never trusted.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from grading.grade.limits import WALL_PER_CPU
from grading.grade.plugin import GUARD_SIGNS  # a failure that is a cheat, not a mistake
from grading.judge.impl import REPO_ROOT, level_of, part_of

COPIED = ["katas", "grading", "reference", "conftest.py", "pyproject.toml", "README.md"]
MEMORY_LIMIT = 8 * 2**30  # address space of the test process, in bytes
OUTPUT_LIMIT = 32 * 2**20  # bytes a run may print or write to one file
MEMORY_SIGNS = ("MemoryError", "can't allocate memory", "Cannot allocate memory")
# grading.judge.impl's message when the submitted file raises while it is imported.
IMPORT_FAILED = re.compile(r"importing \S+ failed: (.+)")
NOT_IMPORTED = "not run: the file does not import (the kata's reason says why)"
PR_SET_PDEATHSIG = 1


@dataclass
class KataRun:
    """The outcome of one kata's tests on one submission."""

    kata: str
    tests: list[dict] = field(default_factory=list)  # {id, level, part, status, message, ...}
    reason: str | None = None  # why the run did not end normally, if it did not
    zeroed: bool = False  # whether that reason scores the kata zero (a crash, a rule broken)
    cpu_s: float = 0.0  # CPU seconds the test process and its helpers used
    output_tail: str = ""

    def count(self, status: str) -> int:
        return sum(t["status"] == status for t in self.tests)


def copy_repository(root: Path, repo: Path = REPO_ROOT) -> Path:
    """A copy of what the katas' tests need (katas, harness, references, configuration)."""
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    for name in COPIED:
        source = repo / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        elif source.exists():
            shutil.copy2(source, root / name)
    return root


def make_sandbox(
    root: Path, kata: str, submission: Path, repo: Path = REPO_ROOT, parts: dict | None = None
) -> Path:
    """A private copy of what the tests need, with the submission as `submission/<kata>.py`.

    `parts` ({kata: file}) are the submission's files for other katas: each replaces that kata's
    `solution.py` in the copy, so a submission that imports `katas.<other>.solution` (the serving
    engine builds on the other katas) runs on its own parts.
    """
    copy_repository(root, repo)
    (root / "reference" / f"{kata}.py").unlink(missing_ok=True)
    for folder in ("submission", "home", "tmp"):
        (root / folder).mkdir()
    shutil.copy2(submission, root / "submission" / f"{kata}.py")
    for other, file in (parts or {}).items():
        if other != kata and (root / "katas" / other / "solution.py").is_file():
            shutil.copy2(file, root / "katas" / other / "solution.py")
    return root


def sandbox_env(sandbox: Path, kata: str, results: Path) -> dict[str, str]:
    """The environment a graded run sees: the grader's, less CI and KATAS_*, with its own HOME,
    TMPDIR and caches inside the sandbox."""
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("KATAS_")}
    # Caches the libraries write to live inside the sandbox too: an inherited
    # TORCHINDUCTOR_CACHE_DIR (PyTorch sets it in the grader's own process once used) would point
    # the submission's run at /tmp.
    cache = sandbox / "home" / ".cache"
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(cache / "torchinductor"),
        TRITON_CACHE_DIR=str(cache / "triton"), XDG_CACHE_HOME=str(cache),
    )  # fmt: skip
    env.update(
        HOME=str(sandbox / "home"), TMPDIR=str(sandbox / "tmp"), OMP_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1", KATAS_GRADE_RESULTS=str(results),
        KATAS_GRADE_SANDBOX=str(sandbox), KATAS_GRADE_KATA=kata,
    )  # fmt: skip
    return env


def run_kata(
    kata: str,
    submission: Path,
    workdir: Path,
    *,
    seed: int,
    cpu_limit: float,
    test_limit: float,
    test_cpu: float = 0.0,
    examples: int = 60,
    select: str | None = None,
    parts: dict | None = None,
) -> KataRun:
    """Grade `submission` (one .py file) on `kata` in `workdir`, which must not exist yet.

    Each test may take `test_limit` seconds on the clock and `test_cpu` seconds of CPU time
    (0: no such limit); the whole run `cpu_limit` CPU seconds (and
    WALL_PER_CPU times that on the clock). `parts`: the submission's files for other katas (see
    make_sandbox)."""
    sandbox = make_sandbox(workdir / "sandbox", kata, submission, parts=parts)
    results, log = workdir / "results.jsonl", workdir / "output.log"
    env = sandbox_env(sandbox, kata, results)
    env.update(KATAS_GRADE_EXAMPLES=str(examples), KATAS_GRADE_TEST_CPU=str(test_cpu))
    command = [
        sys.executable, "-m", "pytest", f"katas/{kata}", "-q", "-p", "grading.grade.plugin",
        "-p", "no:cacheprovider", f"--impl=submission/{kata}.py", "--hypothesis-profile=grade",
        f"--hypothesis-seed={seed}", f"--timeout={test_limit:g}",
    ]  # fmt: skip
    if select is not None:
        command += ["-k", select]
    run = KataRun(kata)
    with log.open("wb") as out:
        child = subprocess.Popen(
            command, cwd=sandbox, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: _limits(cpu_limit),
        )  # fmt: skip
        returncode, run.cpu_s, stopped = _wait(child, cpu_limit, WALL_PER_CPU * cpu_limit)
    finished, violations = _read_results(run, results)
    run.output_tail = log.read_bytes()[-4000:].decode(errors="replace")
    _explain(run, returncode, log.stat().st_size, finished, violations, stopped, cpu_limit)
    return run


def _limits(cpu_limit: float) -> None:
    """Run in the child before it starts: limits that no code inside can raise again. The CPU
    limit is each process's own (the test process, and each helper it starts)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    seconds = math.ceil(cpu_limit)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
    if sys.platform == "linux":  # die with the grader: a lost grading worker leaves no run behind
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _wait(child: subprocess.Popen, cpu_limit: float, wall_limit: float) -> tuple:
    """(exit status or None, CPU seconds used, whether the grader stopped the run). The run is
    stopped (its whole process group killed) once its CPU time, helpers included, or the clock
    passes its limit; a process past RLIMIT_CPU is killed by the kernel (SIGXCPU)."""
    start = time.monotonic()
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            return child.returncode, usage.ru_utime + usage.ru_stime, False
        if _group_cpu(child.pid) > cpu_limit or time.monotonic() - start > wall_limit:
            os.killpg(child.pid, signal.SIGKILL)
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = os.waitstatus_to_exitcode(status)
            return None, usage.ru_utime + usage.ru_stime, True
        time.sleep(1.0)


def _group_cpu(pgid: int) -> float:
    """CPU seconds used so far by the live processes of a process group (Linux's /proc)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields: state, ppid, pgrp, ..., utime (11), stime (12)
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _read_results(run: KataRun, results: Path) -> tuple[bool, list[str]]:
    """Fill `run.tests` from the results file, written test by test; return (whether the session
    ended, violations). A test with no outcome has status "error": the one that was running when
    the run ended says so, the others were not reached."""
    lines = results.read_text(errors="replace").splitlines() if results.exists() else []
    collected, outcome, started, finished, violations = [], {}, set(), False, []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = record.get("kind")
        if kind == "collected":
            collected.append(record["id"])
        elif kind == "started":
            started.add(record["id"])
        elif kind == "test":
            worst = outcome.get(record["id"])
            if worst is None or worst["status"] in ("passed", "skipped"):
                outcome[record["id"]] = record
        elif kind == "violation":
            violations.append(record["message"])
        elif kind == "finished":
            finished = True
    for test_id in collected:
        record = outcome.get(test_id) or {
            "status": "error",
            "message": RUNNING if test_id in started else NOT_REACHED,
            "duration_s": 0.0,
        }
        run.tests.append(
            dict(
                id=test_id,
                level=level_of(test_id, run.kata),
                part=part_of(test_id, run.kata),
                status=record["status"],
                message=record.get("message", ""),
                duration_s=record.get("duration_s", 0.0),
                cpu_s=record.get("cpu_s", 0.0),
            )  # fmt: skip
        )
    return finished, violations


RUNNING = "the run ended while this test was running"
NOT_REACHED = "not reached: the run ended before this test started"
TIMED_OUT = "did not finish within"  # grading.judge.plugin's message for a test past its limit


def _explain(
    run: KataRun, returncode: int | None, printed: int, finished: bool, violations: list[str],
    stopped: bool, cpu_limit: float,
) -> None:  # fmt: skip
    """Say why a run did not end normally (run.reason), and whether that scores it zero."""
    zero = _why_zero(run, returncode, printed, finished, violations)
    if zero is not None:
        run.reason, run.zeroed = zero, True
        return
    not_reached = sum(t["message"] == NOT_REACHED for t in run.tests)
    running = next((t["id"] for t in run.tests if t["message"] == RUNNING), None)
    reasons = []
    hung = [t for t in run.tests if TIMED_OUT in t["message"]]
    if hung:
        more = f" (and {len(hung) - 1} more tests)" if len(hung) > 1 else ""
        limit = re.search(r"within (\S+ s(?: of CPU time)?)", hung[0]["message"])
        after = f" after {limit.group(1)}" if limit else ""
        reasons.append(f"timed out in test {hung[0]['id']}{after}{more}")
    if stopped or returncode == -signal.SIGXCPU:
        during = f" during {running}" if running else ""
        reasons.append(
            f"stopped at the run's limit ({cpu_limit:g} CPU s){during}, "
            f"{not_reached} test{'s' * (not_reached != 1)} not reached"
        )
    run.reason = "; ".join(reasons) or None


def _why_zero(
    run: KataRun, returncode: int | None, printed: int, finished: bool, violations: list[str]
) -> str | None:
    """The reason a run scores zero whatever its tests said, or None."""
    if violations:
        return f"broke the grading rules: {violations[0]}"
    if returncode is not None and returncode < 0 and returncode != -signal.SIGXCPU:
        sig = signal.Signals(-returncode)
        if sig == signal.SIGXFSZ or printed >= OUTPUT_LIMIT:
            return f"flooded the output: over {OUTPUT_LIMIT // 2**20} MB written"
        return f"crashed: the test process was killed by {sig.name}"
    broken = [t for t in run.tests if any(m in t["message"] for m in GUARD_SIGNS)]
    if broken:
        line = next(
            (s for s in broken[0]["message"].splitlines() if any(m in s for m in GUARD_SIGNS)), ""
        )
        rule = line.split(": ", 1)[-1].strip()  # without "E   grading.judge.guards.GuardFailure: "
        return f"broke a rule the harness checks on every call: {rule[:300]}"
    if any(sign in t["message"] for t in run.tests for sign in MEMORY_SIGNS):
        return f"exhausted memory: over the limit of {MEMORY_LIMIT // 2**30} GiB"
    if printed >= OUTPUT_LIMIT:
        return f"flooded the output: over {OUTPUT_LIMIT // 2**20} MB written"
    if returncode is not None and returncode >= 0 and not finished:
        return (
            f"the test run ended early (exit status {returncode}) before reporting every test; "
            "a submission may not exit the process"
        )
    # A file that raises while it is imported (a crash, memory, a rule: said above).
    failed_import = [m for t in run.tests if (m := IMPORT_FAILED.search(t["message"]))]
    if failed_import:
        # Every test fails alike: say it once, as the reason, not in each test's message.
        for test in run.tests:
            if IMPORT_FAILED.search(test["message"]):
                test["message"] = NOT_IMPORTED
        return f"does not import: {failed_import[0].group(1).strip()[:300]}"
    if not run.tests:
        return "no test ran: the kata's tests could not be collected"
    return None
