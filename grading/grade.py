"""Grade one submission or a whole class: `python -m grading.grade PATH [options]`.

    PATH                 a submission folder holding `<kata>.py` files named after the katas,
                         a single .py file (with --kata), or a folder of submission folders
    --kata KATA          grade only this kata (needed when PATH is a single file)
    --out DIR            where the reports go (default grades/)
    --seed N             the Hypothesis seed (default: a fresh one, recorded in every report)
    --timeout SECONDS    the longest one kata may run for one submission (default 600)
    --examples N         Hypothesis examples per property test (default 60; `ci` draws 30)
    --jobs N             katas graded at once (default 1)

Per submission it writes DIR/<submission>/grade.json, junit.xml and summary.md; for a class,
also DIR/class.csv, DIR/class.md and DIR/scores.png. Each kata of each submission runs in its own
sandboxed process (grading/sandbox.py); grading/README.md describes what is stopped and how.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import secrets
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from grading.impl import REPO_ROOT, kata_names
from grading.sandbox import KataRun, run_kata
from grading.source_check import check_source

TEST_TIMEOUT = 120.0  # seconds one test may take before it is stopped


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


def kata_report(run: KataRun | None) -> dict:
    """The pinned per-kata shape of grade.json; None means the submission lacks the kata."""
    if run is None:
        return dict(score=0.0, passed=0, failed=0, levels={}, reason="missing", tests=[])
    levels: dict[str, dict[str, int]] = {}
    for test in run.tests:
        level = levels.setdefault(str(test["level"]), {"passed": 0, "failed": 0})
        if test["status"] == "passed":
            level["passed"] += 1
        elif test["status"] in ("failed", "error"):
            level["failed"] += 1
    return dict(
        score=round(run.score, 4),
        passed=run.count("passed"),
        failed=run.count("failed") + run.count("error"),
        levels=dict(sorted(levels.items(), key=lambda kv: int(kv[0]))),
        reason=run.reason,
        tests=run.tests,
    )


def grade_one(
    kata: str, file: Path | None, *, seed: int, timeout: float, examples: int,
    parts: dict[str, Path] | None = None,
) -> dict:  # fmt: skip
    """One kata of one submission, in a sandbox of its own, with the submission's other katas
    (`parts`) in place of the stubs."""
    if file is None:
        return kata_report(None)
    if refused := [r for f in {file, *(parts or {}).values()} for r in check_source(f)]:
        return kata_report(
            KataRun(kata, reason=f"refused by the source check: {'; '.join(refused)}")
        )
    with tempfile.TemporaryDirectory(prefix=f"grade-{kata}-") as tmp:
        run = run_kata(
            kata, file, Path(tmp) / "run", seed=seed, timeout=timeout,
            test_timeout=min(TEST_TIMEOUT, timeout), examples=examples, parts=parts,
        )  # fmt: skip
    return kata_report(run)


def grade_all(
    submissions: dict[str, dict[str, Path]], katas: list[str], *, seed: int, timeout: float,
    examples: int, jobs: int, env: dict,
) -> list[dict]:  # fmt: skip
    """Every kata of every submission, `jobs` at a time; one report per submission."""
    reports = {
        name: {"submission": name, "seed": seed, "environment": env, "score": 0.0, "katas": {}}
        for name in submissions
    }
    work = [(name, kata) for name in submissions for kata in katas]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {
            pool.submit(
                grade_one, kata, submissions[name].get(kata), seed=seed, timeout=timeout,
                examples=examples, parts=submissions[name],
            ): (name, kata)
            for name, kata in work
        }  # fmt: skip
        for future in as_completed(futures):
            name, kata = futures[future]
            entry = future.result()
            reports[name]["katas"][kata] = entry
            why = f" ({entry['reason']})" if entry["reason"] else ""
            print(f"  {name} / {kata}: {entry['score']:.2f}{why}", flush=True)
    for report in reports.values():
        report["katas"] = {kata: report["katas"][kata] for kata in katas}
        scores = [entry["score"] for entry in report["katas"].values()]
        report["score"] = round(sum(scores) / len(scores), 4)
    return list(reports.values())


def junit_xml(report: dict) -> str:
    """JUnit XML: one testsuite per kata, for CI systems and learning-management imports."""
    from xml.etree import ElementTree as ET

    suites = ET.Element("testsuites", name=report["submission"])
    for kata, entry in report["katas"].items():
        suite = ET.SubElement(
            suites, "testsuite", name=kata, tests=str(len(entry["tests"]) or 1),
            failures=str(entry["failed"]), errors="0",
            skipped=str(sum(t["status"] == "skipped" for t in entry["tests"])),
        )  # fmt: skip
        if entry["reason"] is not None:
            case = ET.SubElement(suite, "testcase", classname=kata, name="kata")
            ET.SubElement(case, "failure", message=entry["reason"]).text = entry["reason"]
        for test in entry["tests"]:
            case = ET.SubElement(
                suite, "testcase", classname=kata, name=test["id"], time=f"{test['duration_s']}"
            )
            if test["status"] in ("failed", "error"):
                tag = "failure" if test["status"] == "failed" else "error"
                ET.SubElement(case, tag, message=test["message"][:200]).text = test["message"]
            elif test["status"] == "skipped":
                ET.SubElement(case, "skipped", message=test["message"][:200])
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def summary_md(report: dict) -> str:
    env = report["environment"]
    lines = [
        f"# {report['submission']}: {report['score'] * 100:.1f} / 100",
        "",
        f"Seed {report['seed']}; {env['device']}; Python {env['python']}, torch {env['torch']}, "
        f"Triton {env['triton']}; commit {env['commit']}.",
        "",
        "| kata | score | passed | failed | levels | reason |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for kata, e in report["katas"].items():
        levels = ", ".join(
            f"{n}: {v['passed']}/{v['passed'] + v['failed']}" for n, v in e["levels"].items()
        )
        lines.append(
            f"| {kata} | {e['score']:.2f} | {e['passed']} | {e['failed']} | {levels} | "
            f"{e['reason'] or ''} |"
        )
    failing = [
        t
        for e in report["katas"].values()
        for t in e["tests"]
        if t["status"] in ("failed", "error")
    ]
    if failing:
        lines += ["", "## Failing tests", ""]
        for t in failing:
            first = next((s for s in t["message"].splitlines() if s.strip()), "")
            lines.append(f"- `{t['id']}`: {first[:160]}")
    lines += ["", f"Replay: `python -m grading.grade PATH --seed {report['seed']}`"]
    return "\n".join(lines) + "\n"


def write_submission(report: dict, out: Path) -> None:
    folder = out / report["submission"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grade.json").write_text(json.dumps(report, indent=2) + "\n")
    (folder / "junit.xml").write_text(junit_xml(report) + "\n")
    (folder / "summary.md").write_text(summary_md(report))


def write_class(reports: list[dict], katas: list[str], out: Path) -> None:
    with (out / "class.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "score", *katas])
        for r in reports:
            writer.writerow([r["submission"], r["score"], *(r["katas"][k]["score"] for k in katas)])
    lines = [
        f"# Class: {len(reports)} submissions, seed {reports[0]['seed']}",
        "",
        "| submission | score | " + " | ".join(katas) + " |",
        "| --- | --- | " + " | ".join("---" for _ in katas) + " |",
    ]
    for r in reports:
        cells = [
            f"{r['katas'][k]['score']:.2f}" + (" ⚠" if r["katas"][k]["reason"] else "")
            for k in katas
        ]
        lines.append(f"| {r['submission']} | {r['score'] * 100:.1f} | " + " | ".join(cells) + " |")
    lines += ["", "⚠: scored zero for a reason given in that submission's summary.md.", ""]
    lines.append("![scores](scores.png)" if histogram(reports, out / "scores.png") else "")
    (out / "class.md").write_text("\n".join(lines) + "\n")


def histogram(reports: list[dict], path: Path) -> bool:
    """A histogram of the class's scores; False (and a note) where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no scores.png (pip install matplotlib)")
        return False
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    ax.hist([r["score"] * 100 for r in reports], bins=range(0, 105, 5), color="#4C72B0")
    ax.set(xlabel="score (out of 100)", ylabel="submissions", xlim=(0, 100))
    ax.set_title(f"{len(reports)} submissions")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grading.grade", description=__doc__.splitlines()[0]
    )
    parser.add_argument("path", type=Path, help="a submission folder, a .py file, or a class")
    parser.add_argument("--kata", choices=kata_names(), help="grade only this kata")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="report folder")
    parser.add_argument("--seed", type=int, help="Hypothesis seed (default: a fresh one)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per kata run")
    parser.add_argument("--examples", type=int, default=60, help="examples per property test")
    parser.add_argument("--jobs", type=int, default=1, help="katas graded at once")
    args = parser.parse_args(argv)

    seed = args.seed if args.seed is not None else secrets.randbelow(2**32)
    katas = [args.kata] if args.kata else kata_names()
    submissions, is_class = submissions_in(args.path.resolve(), args.kata)
    if not submissions:
        print(f"no submissions found in {args.path}", file=sys.stderr)
        return 2
    env = environment(seed)
    print(f"grading {len(submissions)} submission(s) on {', '.join(katas)} with seed {seed}")
    reports = grade_all(
        submissions, katas, seed=seed, timeout=args.timeout, examples=args.examples,
        jobs=args.jobs, env=env,
    )  # fmt: skip
    for report in reports:
        write_submission(report, args.out)
    if is_class:
        write_class(reports, katas, args.out)
    print(f"reports in {args.out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
