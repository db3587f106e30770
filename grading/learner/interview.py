"""Interview practice: one kata against the clock, in a scratch workspace.

    python -m grading.learner.interview KATA [--minutes 45] [--level N]
    (or nox -s interview -- KATA)

A fresh copy of the kata's stub goes to interviews/<kata>-<time>/solution.py (your own
katas/<kata>/solution.py is never touched). The task and targets are printed and the clock
starts. At the prompt:

    check    run the tests on your file now (the quick `dev` examples)
    task     print the task again
    time     how long is left
    done     stop early

When time is up (or at `done`) a thorough run with a hidden seed decides, and a short report
(levels passed, time to green per level, checks made, tests still failing) is printed and saved
as report.md in the workspace.
"""

from __future__ import annotations

import argparse
import datetime
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grading.grade.sandbox import run_kata
from grading.judge.impl import KATAS_DIR, REPO_ROOT, by_part, kata_names, part_name, part_of
from grading.learner.progress import first_line
from grading.learner.tools import pristine_stub

FAILING_SHOWN = 10  # failing tests a check lists


def task_text(kata: str, solution: Path | None = None) -> str:
    """The README's `## The task` and `## Targets` sections; `solution`: the file to edit
    instead of katas/<kata>/solution.py."""
    text = (KATAS_DIR / kata / "README.md").read_text()
    parts = re.split(r"^(?=## )", text, flags=re.M)
    wanted = [p for p in parts if p.startswith(("## The task", "## Targets"))]
    task = "\n".join(wanted).strip() or text
    if solution is not None:
        shown = solution.relative_to(REPO_ROOT) if solution.is_relative_to(REPO_ROOT) else solution
        task = task.replace(f"katas/{kata}/solution.py", str(shown))
    return task


@dataclass
class Interview:
    kata: str
    workspace: Path
    minutes: float = 45.0
    level: int | None = None
    clock: Callable[[], float] = time.monotonic
    ask: Callable[[str], str] = input
    say: Callable[[str], None] = print
    examples: int = 100  # for the final, thorough run
    checks: int = 0
    started: float = 0.0
    green_at: dict[str, float] = field(default_factory=dict)  # part -> seconds from start
    failing: list[tuple[str, str]] = field(default_factory=list)  # the last check's (test, why)

    @property
    def solution(self) -> Path:
        return self.workspace / "solution.py"

    def start(self) -> None:
        self.workspace.mkdir(parents=True, exist_ok=False)
        self.solution.write_text(pristine_stub(self.kata))
        self.started = self.clock()

    def left(self) -> float:
        return self.minutes * 60 - (self.clock() - self.started)

    def _clock_text(self) -> str:
        seconds = max(0, int(self.left()))
        return f"{seconds // 60:02d}:{seconds % 60:02d} left"

    def _select(self) -> str | None:
        """A `-k` expression for the chosen level's test file, or None for every level."""
        return None if self.level is None else f"test_{self.kata}_{self.level}_"

    def check(self) -> dict[str, tuple[int, int]]:
        """Run the tests (dev profile) on the workspace file: {part: (passed, total)}; the
        failing tests and their reasons are kept in `self.failing`."""
        self.checks += 1
        command = [
            sys.executable, "-m", "pytest", f"katas/{self.kata}", "-q", "-p", "no:cacheprovider",
            f"--impl={self.solution}", "--hypothesis-profile=dev", "-rN", "--tb=line",
            f"--junitxml={self.workspace / 'check.xml'}",
        ]  # fmt: skip
        if self.level is not None:
            command += ["-k", self._select()]
        subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True)
        levels, self.failing = _levels_from_junit(self.workspace / "check.xml", self.kata)
        elapsed = self.clock() - self.started
        for n, (passed, total) in levels.items():
            if total and passed == total:
                self.green_at.setdefault(n, elapsed)
        return levels

    def run(self) -> str:
        """The whole interview: the prompt loop, then the final run and the report."""
        self.start()
        self.say(f"Interview: {self.kata}, {self.minutes:g} minutes. Your file: {self.solution}\n")
        self.say(task_text(self.kata, self.solution))
        self.say("\nCommands: check, task, time, done.")
        while self.left() > 0:
            try:
                command = self.ask(f"[{self._clock_text()}] > ").strip().lower()
            except EOFError:
                break
            if self.left() <= 0:
                self.say("Time is up.")
                break
            if command == "check":
                levels = self.check()
                for n, (passed, total) in sorted(levels.items(), key=by_part):
                    self.say(f"  {part_name(n)}: {passed}/{total} passing")
                for test, why in self.failing[:FAILING_SHOWN]:
                    self.say(f"  FAILED {test}: {why}")
                if len(self.failing) > FAILING_SHOWN:
                    self.say(f"  ... and {len(self.failing) - FAILING_SHOWN} more failing")
            elif command == "task":
                self.say(task_text(self.kata, self.solution))
            elif command == "time":
                self.say(self._clock_text())
            elif command in ("done", "quit", "q"):
                break
            elif command:
                self.say("Commands: check, task, time, done.")
        return self.finish()

    def finish(self) -> str:
        """A thorough run with a hidden seed on the workspace file, then the report."""
        seed = secrets.randbelow(2**32)
        self.say("Final run with a hidden seed (thorough examples)...")
        run = run_kata(
            self.kata, self.solution, self.workspace / "final", seed=seed, cpu_limit=1800,
            test_limit=300, examples=self.examples, select=self._select(),
        )  # fmt: skip
        tests = [t for t in run.tests if self.level is None or t["part"] == str(self.level)]
        report = self.report(tests, run.reason if run.zeroed else None, seed)
        (self.workspace / "report.md").write_text(report)
        self.say(report)
        return report

    def report(self, tests: list[dict], reason: str | None, seed: int) -> str:
        used = min(self.clock() - self.started, self.minutes * 60)
        lines = [
            f"# Interview report: {self.kata}",
            "",
            f"Time used {used / 60:.1f} of {self.minutes:g} min; {self.checks} checks; "
            f"final seed {seed}.",
            "",
            "| level | final run | first green check |",
            "| --- | --- | --- |",
        ]
        by_level: dict[str, list[dict]] = {}
        for test in tests:
            by_level.setdefault(test["part"], []).append(test)
        for n, group in sorted(by_level.items(), key=by_part):
            judged = [t for t in group if t["status"] != "skipped"]
            passed = sum(t["status"] == "passed" for t in judged)
            green = self.green_at.get(n)
            when = f"{green / 60:.1f} min" if green is not None else "never"
            verdict = "passed" if judged and passed == len(judged) else f"{passed}/{len(judged)}"
            lines.append(f"| {n} | {verdict} | {when} |")
        if reason:
            lines += ["", f"The final run scored zero: {reason}."]
        failing = [t for t in tests if t["status"] in ("failed", "error")]
        if failing:
            lines += ["", "Still failing:", ""]
            lines += [f"- `{t['id']}`: {first_line(t['message'])}" for t in failing]
        return "\n".join(lines) + "\n"


def _levels_from_junit(path: Path, kata: str) -> tuple[dict, list[tuple[str, str]]]:
    """({part: (passed, total)}, [(failing test, its reason)]) from a JUnit file."""
    from xml.etree import ElementTree as ET

    levels: dict[str, list[int]] = {}
    failing = []
    if not path.exists():
        return {}, []
    for case in ET.parse(path).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        n = part_of(case.get("classname", ""), kata)
        counts = levels.setdefault(n, [0, 0])
        counts[1] += 1
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is None:
            counts[0] += 1
        else:
            why = first_line(problem.get("message") or problem.text or "")
            failing.append((case.get("name", "?"), why))
    return {n: (p, t) for n, (p, t) in levels.items()}, failing


def main(argv: list[str] | None = None) -> int:
    prog = "python -m grading.learner.interview"
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("kata", choices=kata_names())
    parser.add_argument("--minutes", type=float, default=45.0, help="the time you have")
    parser.add_argument("--level", type=int, help="only this level's tests")
    args = parser.parse_args(argv)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    workspace = REPO_ROOT / "interviews" / f"{args.kata}-{stamp}"
    Interview(args.kata, workspace, args.minutes, args.level).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
