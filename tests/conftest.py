"""Helpers for the repository's own tests: run a kata's tests in a fresh pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from mutant_kit import WALL_PER_CPU_SECOND, WarmJudge, limit_cpu, read_adversary

from grading.judge.impl import REPO_ROOT, kata_names

# One thread per process: the self-test runs several processes at once on a machine of a few
# cores, and PyTorch's threads, one per core in each, would wait on each other (a test of a
# minute took twenty).
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@dataclass
class KataRun:
    returncode: int
    output: str

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def run_kata(kata: str, *args: str, timeout: float = 600) -> KataRun:
    """`pytest katas/<kata> *args` in a subprocess, derandomised (the `ci` profile)."""
    # One thread each: the kata tests use small tensors, and the self-test runs several at once.
    env = dict(os.environ, CI="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    command = [
        sys.executable,
        "-m",
        "pytest",
        f"katas/{kata}",
        "-q",
        "-p",
        "no:cacheprovider",
        *args,
    ]
    done = subprocess.run(  # `timeout` CPU seconds, however loaded the machine is
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=WALL_PER_CPU_SECOND * timeout, preexec_fn=lambda: limit_cpu(timeout),
    )  # fmt: skip
    return KataRun(done.returncode, done.stdout + done.stderr)


@pytest.fixture(scope="session")
def kata_runner():
    return run_kata


@pytest.fixture(scope="session")
def warm_judge():
    """One judge per test process: PyTorch is imported once, each mutant or cheat runs in a
    fresh fork (mutant_kit.WarmJudge)."""
    judge = WarmJudge()
    yield judge
    judge.close()


# ----------------------------------------------------------------------------------------------
# `--kata K`: only the self-tests that prove one kata (nox -s check -- K).


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kata",
        action="append",
        default=[],
        metavar="KATA",
        choices=kata_names(),
        help="run only the self-tests that prove this kata (its reference at every level, its "
        "mutants, cheats and messages, its grade); repeat for more",
    )


def katas_of(value: object) -> set[str]:
    """The katas a test's parameter is about: a kata's name, `kata/name` (a mutant's or a
    message's id), a mutant's file (tests/mutants/<kata>/...) or a cheat's (its KATA)."""
    katas = set(kata_names())
    if isinstance(value, str):
        return {value.split("/")[0]} & katas
    if isinstance(value, Path):
        if value.parent.name in katas:
            return {value.parent.name}
        if value.parent == REPO_ROOT / "tests" / "adversarial":
            return {read_adversary(value)[0].kata}
    return set()


def item_katas(item: pytest.Item) -> set[str]:
    """The katas a self-test proves something about: its parameters', and those its
    `kata` marks name (a test of one kata that takes no parameter)."""
    found = {name for mark in item.iter_markers("kata") for name in mark.args}
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec else ():
        found |= katas_of(value)
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = set(config.getoption("kata"))
    if not wanted:
        return
    keep = [bool(item_katas(item) & wanted) for item in items]
    config.hook.pytest_deselected(items=[i for i, k in zip(items, keep, strict=True) if not k])
    items[:] = [i for i, k in zip(items, keep, strict=True) if k]


@pytest.fixture(scope="session")
def katas_under_test(request) -> list[str]:
    """The katas `--kata` names, or every kata."""
    return request.config.getoption("kata") or kata_names()
