"""The GPU tests, rehearsed on the CPU, and the GPU check's plan made from that rehearsal.

Every GPU test runs here at small sizes (`--rehearse`), so a GPU test's code has run before any
GPU sees it; the plan the GPU check follows (`results/gpu_plan.json`) must list exactly the tests
the rehearsal ran and fit the default budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
import torch

from grading.devices import REHEARSAL
from grading.gpu.check import BUDGET_S, PLAN, ordered, planned_total
from grading.judge.guards import GPU_CALLS, guard_module
from grading.judge.impl import REPO_ROOT
from grading.judge.rehearsal import read_plan

REHEARSAL_TIMEOUT_S = 900  # about two minutes of CPU; a shared machine may take longer


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    plan = tmp_path_factory.mktemp("rehearsal") / "plan.json"
    env = dict(os.environ, CI="1", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    command = [
        sys.executable, "-m", "pytest", "katas", "-m", "gpu", "--rehearse", "--impl=reference",
        "-q", "-p", "no:cacheprovider", f"--plan={plan}",
    ]  # fmt: skip
    done = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=REHEARSAL_TIMEOUT_S,
    )  # fmt: skip
    return done, plan


@pytest.mark.slow
def test_every_gpu_test_passes_its_rehearsal(rehearsal):
    done, plan = rehearsal
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "skipped" not in output.splitlines()[-1], output[-2000:]
    assert "rehearsed, not measured" in output
    assert plan.exists()


@pytest.mark.slow
def test_the_committed_plan_lists_what_the_rehearsal_ran(rehearsal):
    _, plan = rehearsal
    ran = {t.id for t in read_plan(plan)}
    committed = {t.id for t in read_plan(PLAN)}
    assert ran == committed, (
        f"results/gpu_plan.json is stale: missing {sorted(ran - committed)[:5]}, gone "
        f"{sorted(committed - ran)[:5]}. Write it again: nox -s rehearse"
    )


def test_the_plan_fits_the_default_budget():
    groups = ordered(read_plan(PLAN))
    total = planned_total(groups)
    assert total <= BUDGET_S, f"the GPU check's plan takes {total:.0f} s, over {BUDGET_S} s"
    kinds = [g[0].kind for g in groups]
    assert kinds == sorted(kinds, key=["correctness", "headline", "sweep"].index)
    headlines = {t.kata for g in groups for t in g if t.kind == "headline"}
    katas = {t.kata for g in groups for t in g}
    assert headlines == katas, f"katas without a headline speed figure: {katas - headlines}"


def test_gpu_check_plan_prints_and_stops():
    done = subprocess.run(
        [sys.executable, "-m", "grading.gpu.check", "--plan"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"of a {BUDGET_S} s budget" in done.stdout


def test_rehearsed_calls_take_the_guards_gpu_branch(monkeypatch, tmp_path):
    """In a rehearsal the CPU plays the GPU: after GPU_CALLS calls in a test, a function runs
    without the counters, as a benchmark's hundredth call on a GPU does."""
    stub = tmp_path / "solution.py"
    stub.write_text("def double(x):\n    return 2 * x\n")
    module = types.ModuleType("rehearsed")
    exec(stub.read_text(), module.__dict__)
    guard = guard_module("rehearsed", module, stub)
    monkeypatch.setenv(REHEARSAL, "1")
    x = torch.ones(3)
    observed = []
    for _ in range(GPU_CALLS + 4):
        guard.last = None
        module.double(x)
        observed.append(guard.last is not None)
    assert observed == [True] * GPU_CALLS + [False] * 4
    monkeypatch.delenv(REHEARSAL)
    guard.new_test()
    for _ in range(GPU_CALLS + 4):
        guard.last = None
        module.double(x)
        assert guard.last is not None, "on the CPU outside a rehearsal every call is observed"
