"""One way for a test to record a measured figure (an error, a cost ratio, a speed-up).

Tests take the `figures` fixture and call `figures.record("name", value, "unit", key=value...)`.
The figures are listed at the end of the run and, with `--figures PATH`, written there as JSON
(the prepared GPU check turns that file into a Markdown table).
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

    def __init__(self) -> None:
        self.figures: list[Figure] = []

    def record(self, name: str, value: float, unit: str = "", **context: Any) -> None:
        # PYTEST_CURRENT_TEST is "path::test_name (call)" while a test runs.
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        self.figures.append(Figure(test, name, float(value), unit, context))

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
