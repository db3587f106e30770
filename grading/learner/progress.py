"""A learner's progress: every run of a kata's tests on `solution.py` speaks in levels and is
remembered, so `nox -s progress` can say where you stand and what to do next.

As a pytest plugin (loaded by the repository's conftest.py) it ends each kata run with lines like

    level 1: 5/13 passing — next: KVCache.update
    level 2: not run

and saves the run to .katas/progress/<kata>.json. Runs with another `--impl`, and runs under CI,
are not saved. `python -m grading.learner.progress` prints the table of every kata.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grading.judge.impl import (
    KATAS_DIR,
    REPO_ROOT,
    ImplError,
    by_part,
    kata_names,
    kata_of,
    part_name,
    part_of,
)

STATE_DIR = REPO_ROOT / ".katas"
NEXT = re.compile(r"level \d+: (\S+) is not implemented yet")


def readme_order() -> list[str]:
    """The katas in the order the repository's README lists them (the suggested path), then
    any it does not list."""
    readme = REPO_ROOT / "README.md"
    text = readme.read_text() if readme.exists() else ""
    listed = [k for k in re.findall(r"^\| \[`(\w+)`\]", text, re.M) if k in kata_names()]
    return listed + [k for k in kata_names() if k not in listed]


def levels_of(kata: str) -> dict[int, str]:
    """{n: title} from the README's `### Level n: title` headings."""
    readme = KATAS_DIR / kata / "README.md"
    text = readme.read_text() if readme.exists() else ""
    return {int(n): title.strip() for n, title in re.findall(r"^### Level (\d+):(.*)$", text, re.M)}


@dataclass
class LevelState:
    passed: int = 0
    failed: int = 0
    first_failure: str = ""  # the first failing test's one-line message
    next_step: str = ""  # the function whose "not implemented yet" a test met first

    @property
    def total(self) -> int:
        return self.passed + self.failed

    def describe(self) -> str:
        if self.total == 0:
            return "not run"  # left out of the run (-k, -x), or every test skipped
        if self.failed == 0:
            return f"passing ({self.passed}/{self.total})"
        line = f"{self.passed}/{self.total} passing"
        if self.next_step:
            return f"{line} — next: {self.next_step}"
        return f"{line} — {self.first_failure}" if self.first_failure else line


@dataclass
class KataRecord:
    kata: str
    when: float = 0.0
    levels: dict[str, LevelState] = field(default_factory=dict)  # by part: "1", "compile"

    def to_json(self) -> dict:
        return {"kata": self.kata, "when": self.when, "levels": {
            n: vars(state) for n, state in sorted(self.levels.items(), key=by_part)}}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> KataRecord:
        levels = {str(n): LevelState(**state) for n, state in data["levels"].items()}
        return cls(data["kata"], data["when"], levels)


def first_line(message: str) -> str:
    """The line of a failure that says the most: the first one starting with 'E ' if any."""
    lines = [s.strip() for s in message.splitlines() if s.strip()]
    errors = [s[1:].strip() for s in lines if s.startswith("E ")]
    return ((errors or lines or [""])[0])[:160]


def record_path(kata: str, state_dir: Path = STATE_DIR) -> Path:
    return state_dir / "progress" / f"{kata}.json"


def load_record(kata: str, state_dir: Path = STATE_DIR) -> KataRecord | None:
    path = record_path(kata, state_dir)
    try:
        return KataRecord.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError):
        return None


class ProgressRecorder:
    """Collects outcomes per kata and level during one pytest run."""

    def __init__(self, save: bool) -> None:
        self.save = save
        self.records: dict[str, KataRecord] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped or (report.when != "call" and report.passed):
            return
        try:
            kata = kata_of(report.fspath)
        except ImplError:
            return
        record = self.records.setdefault(kata, KataRecord(kata, time.time()))
        state = record.levels.setdefault(part_of(report.nodeid, kata), LevelState())
        if report.passed:
            state.passed += 1
            return
        state.failed += 1
        message = str(report.longrepr)
        if not state.first_failure:
            state.first_failure = first_line(message)
        found = NEXT.search(message)
        if found and not state.next_step:
            state.next_step = found.group(1)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        for kata, record in sorted(self.records.items()):
            terminalreporter.section(f"{kata}: levels")
            titles = {str(n): title for n, title in levels_of(kata).items()}
            for n in sorted(set(titles) | set(record.levels), key=by_part):
                state = record.levels.get(n, LevelState())
                title = f" ({titles[n]})" if n in titles else ""
                terminalreporter.write_line(f"{part_name(n)}{title}: {state.describe()}")
            if self.save:
                path = record_path(kata)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(record.to_json(), indent=1) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    impl = config.getoption("--impl", default="solution")
    save = impl in (None, "", "solution") and not os.environ.get("CI")
    config.pluginmanager.register(ProgressRecorder(save), "kata-progress")


def table(state_dir: Path = STATE_DIR) -> list[tuple[str, str, str]]:
    """(kata, level, state) for every level of every kata, from the last saved runs."""
    rows = []
    for kata in readme_order():
        record = load_record(kata, state_dir)
        titles = levels_of(kata) or {1: ""}
        for n, title in sorted(titles.items()):
            if record is None:
                state = "not started"
            else:
                state = record.levels.get(str(n), LevelState()).describe()
            rows.append((kata, f"{n}: {title}".rstrip(": "), state))
    return rows


def advice(rows: list[tuple[str, str, str]]) -> str:
    """What to do next: the first level that is started but failing, else the first not started."""
    for kata, level, state in rows:
        if not state.startswith(("passing", "not started", "not run")):
            return f"Next: keep going with {kata}, level {level} (nox -s {kata})."
    for kata, level, state in rows:
        if state in ("not started", "not run"):
            return (
                f"Next: start {kata}, level {level}: read katas/{kata}/README.md, "
                f"then run nox -s {kata}."
            )
    return (
        "Every level passes. Run each kata with `-- --hypothesis-profile thorough`, "
        "or practise against the clock: nox -s interview -- <kata>."
    )


def main(argv: list[str] | None = None) -> int:
    """Print the progress table (with Rich when it is installed)."""
    rows = table()
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        width = max(len(k) for k, _, _ in rows)
        for kata, level, state in rows:
            print(f"{kata:<{width}}  level {level:<40.40}  {state}")
        print(advice(rows))
        return 0
    grid = Table("kata", "level", "state", title="Your progress (from the last run of each kata)")
    style = {"passing": "green", "not started": "dim", "not run": "dim"}
    for kata, level, state in rows:
        colour = next((c for prefix, c in style.items() if state.startswith(prefix)), "red")
        grid.add_row(kata, level, f"[{colour}]{state}[/]")
    console = Console()
    console.print(grid)
    console.print(advice(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
