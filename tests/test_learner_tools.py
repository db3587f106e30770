"""The learner's tools (progress, hint, reset, watch) and interview practice, end to end.

Each runs on a scratch copy of the repository (a git repository of its own), so nothing here
touches the real katas or .katas/ state.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grading.grade.sandbox import copy_repository
from grading.judge.impl import REPO_ROOT
from grading.learner.interview import Interview

KATA = "context_extension"


@pytest.fixture
def scratch(tmp_path) -> Path:
    """A copy of the repository, committed, as a learner's clone would be."""
    root = copy_repository(tmp_path / "repo")
    git = ["git", "-c", "user.name=learner", "-c", "user.email=learner@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)
    return root


def run(root: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # the learner's own runs are saved
    env.update(OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def test_progress_follows_the_learners_runs(scratch):
    before = run(scratch, "-m", "grading.learner.progress")
    assert before.returncode == 0, before.stderr
    assert KATA in before.stdout and "not started" in before.stdout
    assert "start kv_cache" in before.stdout  # the README's first kata, not the alphabet's
    stub_run = run(
        scratch, "-m", "pytest", f"katas/{KATA}", "-q", "-p", "no:cacheprovider",
        "-k", "not experiment",
    )  # fmt: skip
    assert stub_run.returncode == 1
    assert "passing — next:" in stub_run.stdout, stub_run.stdout[-2000:]  # summary in levels
    assert "level 4 (the experiment): not run" in stub_run.stdout  # left out by -k
    during = run(scratch, "-m", "grading.learner.progress")
    assert "passing — next:" in during.stdout and f"keep going with {KATA}" in during.stdout
    shutil.copy(scratch / "reference" / f"{KATA}.py", scratch / "katas" / KATA / "solution.py")
    green = run(scratch, "-m", "pytest", f"katas/{KATA}", "-q", "-p", "no:cacheprovider")
    assert green.returncode == 0, green.stdout[-2000:]
    after = run(scratch, "-m", "grading.learner.progress")
    rows = [line for line in after.stdout.splitlines() if KATA in line]
    assert rows and all("passing (" in row for row in rows), after.stdout
    assert run(scratch, "-m", "grading.learner.tools", "reset", KATA).returncode == 0
    forgotten = run(scratch, "-m", "grading.learner.progress")
    rows = [line for line in forgotten.stdout.splitlines() if KATA in line]
    assert rows and all("not started" in row for row in rows), forgotten.stdout


def test_hints_come_one_rung_at_a_time(scratch):
    hints = scratch / "katas" / KATA / "hints.md"
    ladder = [line for line in hints.read_text().splitlines() if line.startswith("## ")]
    assert len(ladder) >= 2, f"{hints} should hold a ladder of '## ' rungs"
    first = run(scratch, "-m", "grading.learner.tools", "hint", KATA)
    assert f"Hint 1 of {len(ladder)}" in first.stdout and ladder[0] in first.stdout
    assert ladder[1] not in first.stdout  # the next rung stays out of sight
    second = run(scratch, "-m", "grading.learner.tools", "hint", KATA)
    assert f"Hint 2 of {len(ladder)}" in second.stdout and ladder[1] in second.stdout
    again = run(scratch, "-m", "grading.learner.tools", "hint", KATA, "--all")
    assert ladder[0] in again.stdout and ladder[1] in again.stdout
    assert len(ladder) < 3 or ladder[2] not in again.stdout


def test_reset_restores_the_stub_and_keeps_a_backup(scratch):
    solution = scratch / "katas" / KATA / "solution.py"
    stub = solution.read_text()
    solution.write_text("# my half-finished work\n")
    done = run(scratch, "-m", "grading.learner.tools", "reset", KATA)
    assert done.returncode == 0, done.stderr
    assert solution.read_text() == stub
    backups = list((scratch / ".katas" / "backups" / KATA).glob("solution-*.py"))
    assert [b.read_text() for b in backups] == ["# my half-finished work\n"]


def test_watch_reruns_the_tests_on_save(scratch):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    log = scratch / "watch.log"
    with log.open("w") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "grading.learner.tools", "watch", KATA, "--", "-q", "-x",
             "-p", "no:cacheprovider"],
            cwd=scratch, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        assert _wait_for(log, "for saves", 180), log.read_text()[-2000:]  # after the first run
        solution = scratch / "katas" / KATA / "solution.py"
        solution.write_text(solution.read_text() + "\n# saved again\n")
        assert _wait_for(log, "solution.py changed: re-running", 60), log.read_text()[-2000:]
        assert _wait_for(log, "failed", 120, after="re-running"), log.read_text()[-2000:]
    finally:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=30)


def _wait_for(log: Path, text: str, seconds: float, after: str = "") -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        content = log.read_text()
        if text in content[content.find(after) if after in content else len(content) :]:
            return True
        time.sleep(0.5)
    return False


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_interview_scripted(tmp_path):
    """check on the stub, then paste a solution, check again, done: the report says it all."""
    clock, said = FakeClock(), []
    workspace = tmp_path / "interview"

    def ask(prompt: str) -> str:
        said.append(prompt)
        clock.now += 300  # five minutes per command
        script = ["time", "check", "paste", "check", "done"]
        command = script[len([p for p in said if p.startswith("[")]) - 1]
        if command == "paste":
            shutil.copy(REPO_ROOT / "reference" / f"{KATA}.py", workspace / "solution.py")
            return "task"
        return command

    interview = Interview(
        KATA, workspace, minutes=45, level=1, clock=clock, ask=ask, say=said.append, examples=5
    )
    report = interview.run()
    assert (workspace / "report.md").read_text() == report
    prompts = [line for line in said if line.startswith("[")]
    assert prompts[0].startswith("[45:00 left]") and prompts[1].startswith("[40:00 left]")
    assert interview.checks == 2
    assert "| 1 | passed | 20.0 min |" in report, report
    text = "\n".join(said)
    assert str(workspace / "solution.py") in text  # the task names the file to edit
    assert f"katas/{KATA}/solution.py" not in text
    assert "FAILED test_" in text and "not implemented yet" in text  # the stub's check
    assert (REPO_ROOT / "katas" / KATA / "solution.py").read_text() != (
        workspace / "solution.py"
    ).read_text()  # the learner's own file was never touched


def test_interview_ends_when_time_is_up(tmp_path):
    clock, said = FakeClock(), []

    def ask(prompt: str) -> str:
        clock.now += 46 * 60
        return "check"

    interview = Interview(
        KATA, tmp_path / "late", minutes=45, level=1, clock=clock, ask=ask, say=said.append,
        examples=3,
    )  # fmt: skip
    report = interview.run()
    assert "Time is up." in said and interview.checks == 0
    assert "| 1 | 0/" in report and "Still failing:" in report
