"""The prepared GPU check: every GPU test and benchmark of the repository, within a time budget.

    python3 -m grading.gpu.check                 # plan, run, figures and a table in gpu-results/
    python3 -m grading.gpu.check --plan          # the plan only
    python3 -m grading.gpu.check --record        # ... and the table appended to results/gpu.md

Runs with the machine's own python3 and installs nothing (PyTorch >= 2.4, Triton >= 3.0, pytest,
pytest-timeout and Hypothesis must be there). The plan, `results/gpu_plan.json`, comes from the
rehearsal of the GPU tests on the CPU (`nox -s rehearse`): every GPU test with its estimated seconds
on an H200 (`grading.judge.rehearsal`). The check prints the plan first, then runs the tests in
order of value: each kata's correctness on the GPU, then each kata's headline speed figure, then the
sweeps. Each kata's tests of one kind run in a pytest process of their own, each test with a time
limit; no process starts past the budget. Figures and the table of outcomes are written after every
test, so a check stopped early keeps what it measured; the table marks each test passed, failed or
not reached.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from grading.judge.figures import markdown_table
from grading.judge.impl import REPO_ROOT
from grading.judge.rehearsal import PLAN, PlannedTest, read_plan

BUDGET_S = 420  # a 10-minute loan, less the machine's start and the copies
KINDS = ("correctness", "headline", "sweep")
START_S = 10.0  # one pytest process: Python, PyTorch, CUDA's context, collection
LIMIT_FACTOR, LIMIT_MIN_S = 5.0, 60.0  # each test's time limit: 5x its estimate, at least 60 s
LOG = "GPU_CHECK_LOG"  # where the pytest processes append one line per test (this module)


def ordered(plan: list[PlannedTest]) -> list[list[PlannedTest]]:
    """The plan in order of value, as groups that each run in one process: (kind, kata)."""
    katas = sorted({t.kata for t in plan})
    groups = []
    for kind in KINDS:
        for kata in katas:
            group = [t for t in plan if t.kind == kind and t.kata == kata]
            if group:
                groups.append(group)
    return groups


def in_process(group: list[PlannedTest]) -> list[float]:
    """Each test's estimate where it runs: a kernel compiles once per process."""
    compiled: set[str] = set()
    return [t.work.estimate_seconds(compiled) for t in group]


def group_seconds(group: list[PlannedTest]) -> float:
    return START_S + sum(in_process(group))


def plan_text(groups: list[list[PlannedTest]], budget: float) -> str:
    lines, total = [f"plan ({PLAN.relative_to(REPO_ROOT)}), estimated on an H200:"], 0.0
    for group in groups:
        total += START_S
        lines.append(f"  {group[0].kind} / {group[0].kata}: a process ({START_S:.0f} s to start)")
        for t, seconds in zip(group, in_process(group), strict=True):
            total += seconds
            lines.append(f"    {seconds:7.1f} s  {total:7.1f} s  {t.id}")
    lines.append(f"total {total:.0f} s of a {budget:.0f} s budget")
    return "\n".join(lines)


def planned_total(groups: list[list[PlannedTest]]) -> float:
    return sum(group_seconds(g) for g in groups)


def machine_summary() -> str:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
    python = sys.version.split()[0]
    return f"{gpu}; torch {torch.__version__}; triton {triton_version}; python {python}"


def outcomes_table(groups: list[list[PlannedTest]], outcomes: dict[str, dict]) -> str:
    rows = [
        "| test | kind | estimate (s) | outcome | seconds |",
        "| --- | --- | ---: | --- | ---: |",
    ]
    for group in groups:
        for t in group:
            seen = outcomes.get(t.id)
            outcome = seen["outcome"] if seen else "not reached"
            took = f"{seen['duration']:.1f}" if seen else ""
            rows.append(
                f"| {t.id.split('::')[-1]} | {t.kind} | {t.seconds:.1f} | {outcome} | {took} |"
            )
    return "\n".join(rows) + "\n"


def read_log(path: Path) -> dict[str, dict]:
    outcomes = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        outcomes[row["id"]] = row
    return outcomes


def write_report(out: Path, summary: str, groups, outcomes: dict) -> str:
    figures = []
    for path in sorted(out.glob("figures-*.json")):
        figures += json.loads(path.read_text())
    text = (
        f"## {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}: {summary}\n\n"
        + outcomes_table(groups, outcomes)
        + "\n"
        + markdown_table(figures)
    )
    (out / "figures.md").write_text(text)
    return text


def run_group(group: list[PlannedTest], impl: str, out: Path, log: Path, seconds_left: float):
    """One process for one kata's tests of one kind; stopped when the budget is spent."""
    limit = max(LIMIT_MIN_S, LIMIT_FACTOR * max(t.seconds for t in group))
    kata, kind = group[0].kata, group[0].kind
    command = [
        sys.executable, "-m", "pytest", *[t.id for t in group], "-m", "gpu", "-v",
        "-p", "no:cacheprovider", "-p", "grading.gpu.check", f"--impl={impl}",
        f"--figures={out / f'figures-{kind}-{kata}.json'}", f"--timeout={limit:.0f}",
        # A GPU machine's PyTorch and Triton may be older or newer than the CPU environment's:
        # their deprecation notices are shown, not turned into failures that waste the run.
        "-W", "default::DeprecationWarning", "-W", "default::FutureWarning",
    ]  # fmt: skip
    # CI: the derandomised profile, without an example database.
    env = dict(os.environ, CI="1", PYTHONDONTWRITEBYTECODE="1", **{LOG: str(log)})
    try:
        return subprocess.run(command, cwd=REPO_ROOT, env=env, timeout=seconds_left).returncode
    except subprocess.TimeoutExpired:
        print(f"budget spent during {kind} / {kata}: stopped", flush=True)
        return None


def pytest_runtest_logreport(report) -> None:
    """Inside each pytest process the check starts: one JSON line per test, as soon as known."""
    path = os.environ.get(LOG)
    failed_setup = report.when == "setup" and not report.passed
    if path and (report.when == "call" or failed_setup):
        outcome = "skipped" if report.skipped else report.outcome
        row = {"id": report.nodeid, "outcome": outcome, "duration": report.duration}
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the run")
    parser.add_argument("--plan", action="store_true", help="print the plan and stop")
    parser.add_argument("--out", type=Path, default=Path("gpu-results"), help="figures, table")
    parser.add_argument("--impl", default="reference", help="implementation to check")
    parser.add_argument("--record", action="store_true", help="append the table to results/gpu.md")
    args = parser.parse_args(argv)

    groups = ordered(read_plan(PLAN))
    print(plan_text(groups, args.budget), flush=True)
    if args.plan:
        return 0
    summary = machine_summary()
    print(f"GPU check on {summary}", flush=True)
    out = args.out if args.out.is_absolute() else REPO_ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    log = out / "outcomes.jsonl"
    log.unlink(missing_ok=True)
    deadline = time.monotonic() + args.budget
    for group in groups:
        left = deadline - time.monotonic()
        if left < START_S:
            break
        run_group(group, args.impl, out, log, left)
        write_report(out, summary, groups, read_log(log))
    outcomes = read_log(log)
    text = write_report(out, summary, groups, outcomes)
    print(text)
    if args.record:
        with (REPO_ROOT / "results" / "gpu.md").open("a") as f:
            f.write("\n" + text)
    failed = [o for o in outcomes.values() if o["outcome"] == "failed"]
    reached = sum(len(g) for g in groups) == len(outcomes)
    return 1 if failed or not reached else 0


if __name__ == "__main__":
    sys.exit(main())
