"""Run one kata's tests on one submitted file, isolated, and say what happened.

Each run gets a fresh copy of the repository's katas, harness and references (without the kata's
own reference) in a folder of its own, a process group of its own with limits on memory, file
size and time, and its own HOME and TMPDIR. The grader reads only the results file that
`grading.grade_plugin` writes; the submission's exit code and printed output are never trusted.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grading.impl import REPO_ROOT
from grading.progress import level_of

COPIED = ["katas", "grading", "reference", "conftest.py", "pyproject.toml"]
MEMORY_LIMIT = 8 * 2**30  # address space of the test process, in bytes
OUTPUT_LIMIT = 32 * 2**20  # bytes a run may print or write to one file
MEMORY_SIGNS = ("MemoryError", "can't allocate memory", "Cannot allocate memory")
# A failure raised by the harness's guards (grading/guards.py): a cheat, not a mistake.
GUARD_SIGNS = ("GuardFailure", "OffTheBooks")


@dataclass
class KataRun:
    """The outcome of one kata's tests on one submission."""

    kata: str
    tests: list[dict] = field(default_factory=list)  # {id, level, status, message, duration_s}
    reason: str | None = None  # why the kata scores zero, if it does
    output_tail: str = ""

    def count(self, status: str) -> int:
        return sum(t["status"] == status for t in self.tests)

    @property
    def score(self) -> float:
        if self.reason is not None:
            return 0.0
        judged = [t for t in self.tests if t["status"] != "skipped"]
        return sum(t["status"] == "passed" for t in judged) / len(judged) if judged else 0.0


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


def _limits() -> None:
    """Run in the child before it starts: limits that no code inside can raise again."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_kata(
    kata: str,
    submission: Path,
    workdir: Path,
    *,
    seed: int,
    timeout: float,
    test_timeout: float,
    examples: int = 60,
    select: str | None = None,
    parts: dict | None = None,
) -> KataRun:
    """Grade `submission` (one .py file) on `kata` in `workdir`, which must not exist yet;
    `parts`: the submission's files for other katas (see make_sandbox)."""
    sandbox = make_sandbox(workdir / "sandbox", kata, submission, parts=parts)
    results, log = workdir / "results.jsonl", workdir / "output.log"
    env = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("KATAS_")}
    env.update(
        HOME=str(sandbox / "home"), TMPDIR=str(sandbox / "tmp"), OMP_NUM_THREADS="1",
        PYTHONDONTWRITEBYTECODE="1", KATAS_GRADE_RESULTS=str(results),
        KATAS_GRADE_SANDBOX=str(sandbox), KATAS_GRADE_KATA=kata,
    )  # fmt: skip
    env["KATAS_GRADE_EXAMPLES"] = str(examples)
    command = [
        sys.executable, "-m", "pytest", f"katas/{kata}", "-q", "-p", "grading.grade_plugin",
        "-p", "no:cacheprovider", f"--impl=submission/{kata}.py", "--hypothesis-profile=grade",
        f"--hypothesis-seed={seed}", f"--timeout={test_timeout}",
    ]  # fmt: skip
    if select is not None:
        command += ["-k", select]
    run = KataRun(kata)
    with log.open("wb") as out:
        child = subprocess.Popen(
            command, cwd=sandbox, env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_limits,
        )  # fmt: skip
        try:
            returncode = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            returncode = None
            run.reason = f"timed out: the run took longer than {timeout:g} s"
    finished, violations = _read_results(run, results)
    run.output_tail = log.read_bytes()[-4000:].decode(errors="replace")
    if run.reason is None:
        run.reason = _why_zero(run, returncode, log.stat().st_size, finished, violations)
    return run


def _read_results(run: KataRun, results: Path) -> tuple[bool, list[str]]:
    """Fill `run.tests` from the results file; return (whether the session ended, violations)."""
    lines = results.read_text(errors="replace").splitlines() if results.exists() else []
    collected, outcome, finished, violations = [], {}, False, []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = record.get("kind")
        if kind == "collected":
            collected.append(record["id"])
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
            "status": "error", "message": "no result was reported for this test", "duration_s": 0.0
        }  # fmt: skip
        run.tests.append(
            dict(
                id=test_id,
                level=level_of(test_id, run.kata),
                status=record["status"],
                message=record.get("message", ""),
                duration_s=record.get("duration_s", 0.0),
            )  # fmt: skip
        )
    return finished, violations


def _why_zero(
    run: KataRun, returncode: int | None, printed: int, finished: bool, violations: list[str]
) -> str | None:
    """The reason a run scores zero whatever its tests said, or None for an honest run."""
    if violations:
        return f"broke the grading rules: {violations[0]}"
    if returncode is not None and returncode < 0:
        sig = signal.Signals(-returncode)
        if sig == signal.SIGXFSZ or printed >= OUTPUT_LIMIT:
            return f"flooded the output: over {OUTPUT_LIMIT // 2**20} MB written"
        return f"crashed: the test process was killed by {sig.name}"
    broken = [t for t in run.tests if any(m in t["message"] for m in GUARD_SIGNS)]
    if broken:
        line = next(
            (s for s in broken[0]["message"].splitlines() if any(m in s for m in GUARD_SIGNS)), ""
        )
        rule = line.split(": ", 1)[-1].strip()  # without "E   grading.guards.GuardFailure: "
        return f"broke a rule the harness checks on every call: {rule[:300]}"
    if any("Timeout >" in t["message"] for t in run.tests):
        return "hung: a test ran past its time limit and was stopped"
    if any(sign in t["message"] for t in run.tests for sign in MEMORY_SIGNS):
        return f"exhausted memory: over the limit of {MEMORY_LIMIT // 2**30} GiB"
    if printed >= OUTPUT_LIMIT:
        return f"flooded the output: over {OUTPUT_LIMIT // 2**20} MB written"
    if not finished:
        return (
            f"the test run ended early (exit status {returncode}) before reporting every test; "
            "a submission may not exit the process"
        )
    if not run.tests:
        return "no test ran: the kata's tests could not be collected"
    return None
