"""Grade one submission or a whole class: `python -m grading.grade PATH [options]`.

PATH is a submission folder holding `<kata>.py` files named after the katas, a single .py file
(with --kata), or a folder of submission folders. What is graded: the katas given with --kata,
or those an --assignment file names (with their points, levels and weights; see
grading/grade/assignment.py), else every kata. Per submission it writes DIR/<submission>/grade.json,
junit.xml and summary.md (and results.json with --format gradescope); for a class, also
DIR/class.csv, DIR/class.md and DIR/scores.png. Each kata of each submission runs in its own
sandboxed process (grading/grade/sandbox.py), on this machine or on a Ray cluster (--backend ray);
grading/README.md describes what is stopped and how.
"""

from __future__ import annotations

import argparse
import platform
import secrets
import subprocess
import sys
from pathlib import Path

from grading.grade import assignment as assignments
from grading.grade import backends
from grading.grade.limits import (
    GRADE_TEST_LIMIT,
    RUN_LIMIT_FACTOR,
    RUN_LIMIT_FLOOR,
    TEST_CPU_FACTOR,
    TEST_CPU_FLOOR,
    WALL_PER_CPU,
    cached_timings,
    calibration_file,
    limits_for,
    save_timings,
)
from grading.grade.reports import submission_report, write_class, write_submission
from grading.judge.impl import REPO_ROOT, kata_names


def environment(seed: int) -> dict:
    """What a grade depends on besides the submission: enough to replay it."""
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU",
        "commit": commit or None,
        "seed": seed,
    }


def submissions_in(path: Path, kata: str | None) -> tuple[dict[str, dict[str, Path]], bool]:
    """({submission name: {kata: file}}, whether PATH is a class). A kata without a file is
    absent from the inner dict. A folder's files for every kata are listed, even with `kata`:
    the graded kata may build on the others (see make_sandbox)."""
    katas = kata_names()
    if path.is_file():
        if kata is None:
            raise SystemExit(f"{path} is a single file: say which kata it solves with --kata")
        return {path.stem: {kata: path}}, False
    if not path.is_dir():
        raise SystemExit(f"{path}: no such file or folder")

    def files(folder: Path) -> dict[str, Path]:
        return {k: folder / f"{k}.py" for k in katas if (folder / f"{k}.py").is_file()}

    if any((path / f"{k}.py").is_file() for k in kata_names()):
        return {path.name: files(path)}, False
    return {sub.name: files(sub) for sub in sorted(path.iterdir()) if sub.is_dir()}, True


def calibrate(
    katas: list[str], *, examples: int, commit: str | None, test_limit: float, backend
) -> dict[str, dict]:
    """{kata: {"test", "run"}}: the CPU seconds of the reference's slowest test and whole run on
    this machine, measured once per machine, commit and example count, and cached."""
    path = calibration_file(commit, examples)
    timings = cached_timings(path)
    missing = [k for k in katas if k not in timings]
    if missing:
        print(f"measuring the references once on this machine: {', '.join(missing)}", flush=True)
        jobs = [
            (("reference", k), dict(
                kata=k, file=str(REPO_ROOT / "reference" / f"{k}.py"), parts={}, seed=0,
                cpu_limit=7200.0, test_limit=test_limit, test_cpu=0.0, examples=examples,
            ))
            for k in missing
        ]  # fmt: skip
        for (_, kata), run in backend(jobs, "measuring"):
            if run["reason"] is None:
                slowest = max((t["cpu_s"] for t in run["tests"]), default=0.0)
                timings[kata] = {"test": slowest, "run": run["cpu_s"]}
            else:
                print(f"  the reference of {kata} did not run cleanly: {run['reason']}")
        save_timings(path, {k: timings[k] for k in missing if k in timings})
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grading.grade",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("path", type=Path, help="a submission folder, a .py file, or a folder of submissions")
    add(
        "--kata",
        action="append",
        choices=kata_names(),
        metavar="KATA",
        help="grade this kata; repeat for more (default: the assignment's, else every kata)",
    )
    add(
        "--assignment",
        type=Path,
        metavar="FILE",
        help="a TOML file: the katas, their points, levels and weights (default: none, every "
        "kata or part weighs the same, out of 100 points in all)",
    )
    add("--out", type=Path, default=Path("grades"), help="report folder (default: grades)")
    add("--seed", type=int, help="Hypothesis seed (default: a fresh one, recorded)")
    add(
        "--timeout",
        type=float,
        metavar="CPU_S",
        help=f"CPU seconds one kata's run may use (default: {RUN_LIMIT_FACTOR:g} times the "
        f"reference's on this machine, at least {RUN_LIMIT_FLOOR:g}; measured once, cached)",
    )
    add(
        "--test-cpu",
        type=float,
        metavar="CPU_S",
        help=f"CPU seconds each test may use (default: {TEST_CPU_FACTOR:g} times the "
        f"reference's slowest test on this machine, at least {TEST_CPU_FLOOR:g})",
    )
    add(
        "--test-limit",
        type=float,
        default=GRADE_TEST_LIMIT,
        metavar="S",
        help=f"seconds on the clock each test may take (default: {GRADE_TEST_LIMIT:g})",
    )
    add(
        "--examples",
        type=int,
        default=60,
        help="Hypothesis examples per property test (default: 60)",
    )
    add("--jobs", type=int, default=1, help="katas graded at once, local backend (default: 1)")
    add(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where the katas run: this machine or a Ray cluster (default: local)",
    )
    add(
        "--address",
        default=None,
        help="the Ray cluster: auto, or ray://HOST:PORT (default: a local Ray instance)",
    )
    add(
        "--gpu",
        action="store_true",
        help="Ray: run katas with GPU tests on nodes with a GPU (default: off)",
    )
    add(
        "--format",
        action="append",
        choices=("gradescope",),
        default=[],
        help="also write this format: gradescope, results.json (default: none)",
    )
    add(
        "--no-source-check",
        dest="source_check",
        action="store_false",
        help="run files the static source check refuses (default: refuse them; "
        "only to test the sandbox's own defences)",
    )
    args = parser.parse_args(argv)

    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    if args.assignment is not None:
        plan = assignments.load(args.assignment)
        if args.kata:
            plan = assignments.Assignment({k: v for k, v in plan.katas.items() if k in args.kata})
    else:
        plan = assignments.every_kata(args.kata or kata_names())
    katas = list(plan.katas)
    single = katas[0] if len(katas) == 1 else None
    submissions, is_class = submissions_in(args.path.resolve(), single)
    if not submissions:
        print(f"no submissions found in {args.path}", file=sys.stderr)
        return 2
    env = environment(seed)
    backend = make_backend(args)
    timings = {}
    if args.timeout is None or args.test_cpu is None:
        timings = calibrate(
            katas, examples=args.examples, commit=env["commit"], test_limit=args.test_limit,
            backend=backend,
        )  # fmt: skip
    limits = {k: limits_for(timings.get(k)) for k in katas}
    limits = {
        k: (args.test_cpu or test_cpu, args.timeout or run_cpu)
        for k, (test_cpu, run_cpu) in limits.items()
    }
    print(f"grading {len(submissions)} submission(s) on {', '.join(katas)} with seed {seed}")
    print(f"limits: {args.test_limit:g} s per test on the clock; in CPU seconds, per test and "
          f"per run (the run's clock: {WALL_PER_CPU:g} times that):")  # fmt: skip
    for k in katas:
        print(f"  {k}: {limits[k][0]:g} per test, {limits[k][1]:g} per run", flush=True)
    jobs = [
        ((name, kata), dict(
            kata=kata, file=str(files[kata]), parts={k: str(v) for k, v in files.items()},
            seed=seed, cpu_limit=limits[kata][1], test_limit=args.test_limit,
            test_cpu=limits[kata][0], examples=args.examples, source_check=args.source_check,
        ))
        for name, files in submissions.items() for kata in katas if kata in files
    ]  # fmt: skip
    runs: dict[str, dict] = {name: {} for name in submissions}
    for (name, kata), run in backend(jobs, "grading"):
        runs[name][kata] = run
    reports = [submission_report(n, runs[n], plan, seed, env) for n in submissions]
    for report in reports:
        write_submission(report, args.out, tuple(args.format))
    if is_class:
        write_class(reports, args.out)
    print(f"reports in {args.out}/")
    return 0


def make_backend(args):

    if args.backend == "ray":
        return backends.RayBackend(args.address, gpu=args.gpu)
    return backends.LocalBackend(args.jobs)
