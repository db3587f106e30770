"""Sessions for working the katas and for testing the repository itself. `nox -l` lists them.

All sessions share one environment, .nox/katas, created on first use: PyTorch is installed once.
Arguments after `--` go to pytest, e.g. `nox -s kv_cache -- --impl reference -x`.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
ENV = ROOT / ".nox" / "katas"
# A CPU build of PyTorch where one is at hand; KATAS_TORCH chooses another (e.g. "torch==2.5.1").
TORCH = os.environ.get("KATAS_TORCH", "torch==2.13.0")
TRITON = os.environ.get("KATAS_TRITON", "triton==3.9.0")

nox.options.sessions = ["selftest"]
nox.options.default_venv_backend = "none"


def shared_python(session: nox.Session, extra: str | None = None) -> str:
    """The shared environment's python, created and brought up to date only when needed.

    `extra` adds pyproject.toml's optional extras (e.g. "sim" or "sim,models") to it, once.
    """
    python = ENV / "bin" / "python"
    wanted = hashlib.sha256(
        (ROOT / "pyproject.toml").read_bytes() + TORCH.encode() + TRITON.encode()
    ).hexdigest()
    stamp = ENV / ".installed"
    if not python.exists():
        session.run(sys.executable, "-m", "venv", str(ENV), external=True)
    if not stamp.exists() or stamp.read_text() != wanted:
        session.run(str(python), "-m", "pip", "install", "--upgrade", "pip", external=True)
        session.run(
            str(python), "-m", "pip", "install", TORCH, TRITON, "-e", f"{ROOT}[test,lint,tools]",
            external=True,
        )  # fmt: skip
        stamp.write_text(wanted)
    extra_stamp = ENV / f".installed-{extra}"
    if extra and (not extra_stamp.exists() or extra_stamp.read_text() != wanted):
        session.run(str(python), "-m", "pip", "install", "-e", f"{ROOT}[{extra}]", external=True)
        extra_stamp.write_text(wanted)
    return str(python)


def pytest(session: nox.Session, *args: str, extra: str | None = None) -> None:
    python = shared_python(session, extra)
    session.run(python, "-m", "pytest", *args, *session.posargs, external=True)


def kata_session(kata: str, summary: str) -> None:
    def run(session: nox.Session) -> None:
        pytest(session, f"katas/{kata}")

    run.__doc__ = f"{summary} (tests katas/{kata}/solution.py)"
    nox.session(name=kata, tags=["katas"], default=False)(run)


def kata_summary(kata: str) -> str:
    """The first heading of the kata's README, without the leading '#'."""
    readme = ROOT / "katas" / kata / "README.md"
    for line in readme.read_text().splitlines() if readme.exists() else []:
        if line.startswith("# "):
            return line[2:].strip()
    return kata


for kata_dir in sorted((ROOT / "katas").glob("*/solution.py")):
    kata_session(kata_dir.parent.name, kata_summary(kata_dir.parent.name))


@nox.session
def selftest(session: nox.Session) -> None:
    """The repository's own tests: references pass, mutants fail, stubs fail kindly (CI runs it)."""
    # Each test starts a pytest process of its own; run them side by side, one line per result
    # (tests that share a slow fixture are grouped onto one worker: --dist loadgroup).
    # The simulation's tests need its extra (Textual), the checkpoint loader `models`, the
    # grader's Ray backend `cluster`.
    # One PyTorch thread per process (tests/conftest.py): the workers share the machine's cores.
    # One worker more than cores: while a test waits (on Ray starting, a terminal, a hung test
    # running into its limit) its core goes to the others.
    session.env["OMP_NUM_THREADS"] = "1"
    workers = str((os.cpu_count() or 1) + 1)
    pytest(
        session, "tests", "-n", workers, "--dist", "loadgroup", "-v", "--durations=10",
        extra="sim,models,cluster",
    )  # fmt: skip


@nox.session(default=False)
def check(session: nox.Session) -> None:
    """Everything that proves one kata, in minutes: -- KATA [KATA ...] [pytest options]. Its
    reference at every level, its mutants, cheats and messages, its grade (the self-test's part)."""
    # The kata names come first; everything from the first option on goes to pytest.
    first_option = next(
        (i for i, arg in enumerate(session.posargs) if arg.startswith("-")), len(session.posargs)
    )
    katas, options = session.posargs[:first_option], session.posargs[first_option:]
    known = sorted(p.parent.name for p in (ROOT / "katas").glob("*/solution.py"))
    if not katas or set(katas) - set(known):
        session.error(f"name the kata(s) to check first: nox -s check -- KATA (one of {known})")
    session.env["OMP_NUM_THREADS"] = "1"
    workers = str((os.cpu_count() or 1) + 1)
    python = shared_python(session, "sim,models,cluster")
    session.run(
        python, "-m", "pytest", "tests", "-n", workers, "--dist", "loadgroup",
        "--durations=5", *(a for k in katas for a in ("--kata", k)), *options, external=True,
    )  # fmt: skip


SWEEP_SEEDS = ("0", "1", "2", "3", "4")


@nox.session(default=False)
def references(session: nox.Session) -> None:
    """Every reference under the thorough profile with seeds 0-4; any failure fails (slow)."""
    python = shared_python(session)
    for kata_dir in sorted((ROOT / "katas").glob("*/solution.py")):
        for seed in SWEEP_SEEDS:
            session.run(
                python, "-m", "pytest", str(kata_dir.parent), "--impl", "reference", "-q",
                "--hypothesis-profile", "thorough", "--hypothesis-seed", seed, *session.posargs,
                external=True,
            )  # fmt: skip


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """Check style with ruff (lint and format)."""
    python = shared_python(session)
    session.run(python, "-m", "ruff", "check", ".", external=True)
    session.run(python, "-m", "ruff", "format", "--check", ".", external=True)


def run_tool(session: nox.Session, *command: str, extra: str | None = None) -> None:
    """`python -m *command posargs` in the shared environment."""
    session.run(shared_python(session, extra), "-m", *command, *session.posargs, external=True)


@nox.session(default=False, tags=["tools"])
def grade(session: nox.Session) -> None:
    """Grade a submission or a class: -- PATH [--kata K] [--out DIR] [--seed N] [--timeout S]."""
    run_tool(session, "grading.grade")


@nox.session(default=False, tags=["tools"])
def interview(session: nox.Session) -> None:
    """Practise one kata against the clock: -- KATA [--minutes 45] [--level N]."""
    run_tool(session, "grading.learner.interview")


@nox.session(default=False, tags=["tools"])
def progress(session: nox.Session) -> None:
    """Where you stand: every kata and level from your last runs, and what to do next."""
    run_tool(session, "grading.learner.progress")


@nox.session(default=False, tags=["tools"])
def hint(session: nox.Session) -> None:
    """The next rung of a kata's hint ladder: -- KATA [--all]."""
    run_tool(session, "grading.learner.tools", "hint")


@nox.session(default=False, tags=["tools"])
def reset(session: nox.Session) -> None:
    """Restore a kata's stub, keeping your solution as a dated backup: -- KATA."""
    run_tool(session, "grading.learner.tools", "reset")


@nox.session(default=False, tags=["tools"])
def watch(session: nox.Session) -> None:
    """Re-run a kata's tests whenever you save: -- KATA [-- pytest arguments]."""
    run_tool(session, "grading.learner.tools", "watch")


@nox.session(default=False, tags=["tools"])
def simulate(session: nox.Session) -> None:
    """Watch the katas work in the terminal: -- [--impl solution] [--export DIR]."""
    run_tool(session, "katas.simulate", extra="sim")


BENCHMARKS = ("serving", "speculative_decoding")  # katas/<kata>/benchmark.py


@nox.session(default=False, tags=["tools"])
def benchmark(session: nox.Session) -> None:
    """Measure a kata's engine, report in results/: -- serving|speculative_decoding [options]."""
    if not session.posargs or session.posargs[0] not in BENCHMARKS:
        session.error(f"name the benchmark first: nox -s benchmark -- KATA (one of {BENCHMARKS})")
    kata, *options = session.posargs
    # models: transformers (the serving benchmark's baselines) and safetensors (the trained pair)
    python = shared_python(session, "models")
    session.run(python, "-m", f"katas.{kata}.benchmark", *options, external=True)


@nox.session(default=False)
def kernel_report(session: nox.Session) -> None:
    """What a kata's kernels would use on A100 and H100, compiled without a GPU (KATA [--impl])."""
    args = session.posargs or ["flash_attention"]
    session.run(shared_python(session), "-m", "grading.gpu.kernel_report", *args, external=True)


@nox.session(default=False)
def gpu_check(session: nox.Session) -> None:
    """GPU tests and benchmarks, figures to gpu-results/ (needs CUDA; see README)."""
    session.run(shared_python(session), "-m", "grading.gpu.check", *session.posargs, external=True)


@nox.session(default=False)
def rehearse(session: nox.Session) -> None:
    """Every GPU test on the CPU at small sizes (speed not judged); writes the GPU check's plan."""
    pytest(
        session, "katas", "-m", "gpu", "--rehearse", "--impl", "reference",
        "--plan", "results/gpu_plan.json",
    )  # fmt: skip


# The versions a borrowed GPU machine is likely to have (KATAS_COMPAT_TORCH / _TRITON change them).
COMPAT_TORCH = os.environ.get("KATAS_COMPAT_TORCH", "torch==2.11.0")
COMPAT_TRITON = os.environ.get("KATAS_COMPAT_TRITON", "triton==3.6.0")
COMPAT_ENV = Path(os.environ.get("KATAS_COMPAT_ENV", ROOT / ".nox" / "compat"))


@nox.session(default=False)
def compat(session: nox.Session) -> None:
    """The GPU machine's versions (torch 2.11, triton 3.6): imports, AOT checks, kernel_report,
    and the rehearsal where that Triton's interpreter runs it (results in results/compat.md)."""
    python = COMPAT_ENV / "bin" / "python"
    if not python.exists():
        session.run(sys.executable, "-m", "venv", str(COMPAT_ENV), external=True)
    session.run(
        str(python), "-m", "pip", "install", COMPAT_TORCH, COMPAT_TRITON, "numpy", "pytest",
        "hypothesis", "pytest-xdist", "pytest-timeout", external=True,
    )  # fmt: skip
    imports = (
        "import grading.judge.plugin, grading.gpu.check, katas.serving.benchmark, reference.serving"
    )
    session.run(str(python), "-c", imports, external=True)
    session.run(str(python), "-m", "grading.gpu.check", "--plan", external=True)
    session.run(
        str(python), "-m", "pytest", "katas/flash_attention/test_flash_attention_compile.py",
        "--impl", "reference", "-q", "-p", "no:cacheprovider", external=True,
    )  # fmt: skip
    session.run(
        str(python),
        "-m",
        "grading.gpu.kernel_report",
        "flash_attention",
        "--impl",
        "reference",
        external=True,
    )
    session.run(
        str(python), "-m", "pytest", "katas", "-m", "gpu", "--rehearse", "--impl", "reference",
        "-q", "-p", "no:cacheprovider", *session.posargs, external=True,
    )  # fmt: skip
