"""One way for a test to record a measured figure (an error, a cost ratio, a speed-up).

Tests take the `figures` fixture and call `figures.record("name", value, "unit", key=value...)`.
The figures are listed at the end of the run and, with `--figures PATH`, written there as JSON
after every test (so a run stopped early keeps what it measured; the prepared GPU check turns
that file into a Markdown table).

A speed target is stated with `figures.expect(ok, "what failed")`: on a GPU it is an assertion;
in a rehearsal on the CPU (`--rehearse`) the times mean nothing, so the target is listed as
"rehearsed, not measured" with what the rehearsal's figures would have said, and not judged.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    test: str
    name: str
    value: float
    unit: str = ""
    context: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        ctx = ", ".join(f"{k}={v}" for k, v in self.context.items())
        return f"{self.name} = {self.value:.4g} {self.unit}".rstrip() + (
            f"  ({ctx})" if ctx else ""
        )


class FigureLog:
    """Collects figures for one test session."""

    def __init__(self, rehearsal: bool = False) -> None:
        self.figures: list[Figure] = []
        self.rehearsal = rehearsal
        self.rehearsed: list[str] = []  # speed targets a rehearsal ran past without judging

    @staticmethod
    def _current_test() -> str:
        # PYTEST_CURRENT_TEST is "path::test_name (call)" while a test runs.
        return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]

    def record(self, name: str, value: float, unit: str = "", **context: Any) -> None:
        if self.rehearsal:
            context = {**context, "rehearsed": True}
        self.figures.append(Figure(self._current_test(), name, float(value), unit, context))

    def expect(self, ok: bool, failure: str) -> None:
        """A speed target: judged on a GPU; in a rehearsal, listed as rehearsed, not measured."""
        __tracebackhide__ = True
        if not self.rehearsal:
            assert ok, failure
            return
        verdict = "would pass" if ok else f"would fail: {failure}"
        self.rehearsed.append(f"{self._current_test().split('::')[-1]}: {verdict}")

    def write_json(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps([asdict(f) for f in self.figures], indent=2) + "\n")


def markdown_table(figures: list[dict[str, Any]]) -> str:
    """Figures (as written to JSON) as a Markdown table."""
    rows = ["| test | figure | value | unit | context |", "| --- | --- | ---: | --- | --- |"]
    for f in figures:
        ctx = ", ".join(f"{k}={v}" for k, v in f["context"].items())
        test = f["test"].split("::")[-1]
        rows.append(f"| {test} | {f['name']} | {f['value']:.4g} | {f['unit']} | {ctx} |")
    return "\n".join(rows) + "\n"
