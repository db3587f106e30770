"""Helpers for the repository's own tests: run a kata's tests in a fresh pytest process."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from grading.impl import REPO_ROOT
from grading.mutants import WALL_PER_CPU_SECOND, WarmJudge, limit_cpu

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
    fresh fork (grading.mutants.WarmJudge)."""
    judge = WarmJudge()
    yield judge
    judge.close()
