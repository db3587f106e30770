"""The grader's reports: per submission grade.json, junit.xml, summary.md (and Gradescope's
results.json); per class class.csv, class.md and scores.png. Every report uses one scale: points
out of the assignment's total, and per kata points out of the kata's."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from grading.grade.assignment import Assignment, score_kata
from grading.judge.impl import part_name

FAILING = ("failed", "error")


def write_submission(report: dict, out: Path, formats: tuple[str, ...] = ()) -> None:
    folder = out / report["submission"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grade.json").write_text(json.dumps(report, indent=2) + "\n")
    (folder / "junit.xml").write_text(junit_xml(report) + "\n")
    (folder / "summary.md").write_text(summary_md(report))
    if "gradescope" in formats:
        (folder / "results.json").write_text(json.dumps(gradescope(report), indent=2) + "\n")


def junit_xml(report: dict) -> str:
    """JUnit XML: one testsuite per kata, for CI systems and learning-management imports."""
    from xml.etree import ElementTree as ET

    suites = ET.Element("testsuites", name=report["submission"])
    for kata, entry in report["katas"].items():
        tests = entry["tests"]
        whole = entry["reason"] is not None  # a testcase of its own for the kata's reason
        suite = ET.SubElement(
            suites, "testsuite", name=kata, tests=str(len(tests) + whole),
            failures=str(sum(t["status"] == "failed" for t in tests) + whole),
            errors=str(sum(t["status"] == "error" for t in tests)),
            skipped=str(sum(t["status"] == "skipped" for t in tests)),
        )  # fmt: skip
        if whole:
            case = ET.SubElement(suite, "testcase", classname=kata, name="kata")
            ET.SubElement(case, "failure", message=entry["reason"]).text = entry["reason"]
        for test in tests:
            case = ET.SubElement(
                suite, "testcase", classname=kata, name=test["id"], time=f"{test['duration_s']}"
            )
            if test["status"] in FAILING:
                tag = "failure" if test["status"] == "failed" else "error"
                ET.SubElement(case, tag, message=test["message"][:200]).text = test["message"]
            elif test["status"] == "skipped":
                ET.SubElement(case, "skipped", message=test["message"][:200])
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def summary_md(report: dict) -> str:
    """What a student reads: points per kata and part, then every failing test with its full
    message (the text a learner's own run shows), by kata and part."""
    env = report["environment"]
    lines = [
        f"# {report['submission']}: {report['points']:g} / {report['max_points']:g} points",
        "",
        f"Seed {report['seed']}; {env['device']}; Python {env['python']}, torch {env['torch']}, "
        f"Triton {env['triton']}; commit {env['commit']}.",
        "",
        f"Scoring: {report['rule']}",
        "",
        "| kata | points | parts | reason |",
        "| --- | --- | --- | --- |",
    ]
    for kata, e in report["katas"].items():
        parts = ", ".join(_part_cell(n, v) for n, v in e["levels"].items())
        lines.append(
            f"| {kata} | {e['points']:g} / {e['max_points']:g} | {parts} | {e['reason'] or ''} |"
        )
    for kata, e in report["katas"].items():
        failing = [t for t in e["tests"] if t["status"] in FAILING]
        if not failing:
            continue
        lines += ["", f"## {kata}: failing tests"]
        for part in e["levels"]:
            group = [t for t in failing if t.get("part") == part]
            if not group:
                continue
            lines += ["", f"### {part_name(part)}", ""]
            for t in group:
                lines += [f"- `{t['id']}`", "", "  ```", *_indent(t["message"]), "  ```", ""]
    lines += ["", f"Replay: `python -m grading.grade PATH --seed {report['seed']}`"]
    return "\n".join(lines) + "\n"


def _part_cell(part: str, counts: dict) -> str:
    measured = counts["passed"] + counts["failed"]
    if not measured:
        return f"{part_name(part)}: not measured here"
    return f"{part_name(part)}: {counts['passed']}/{measured}"


def _indent(message: str) -> list[str]:
    return [f"  {line}" for line in (message.strip() or "(no message)").splitlines()]


def write_class(reports: list[dict], out: Path) -> None:
    """class.csv and class.md: points out of the total, and each kata's points out of its own."""
    katas = list(reports[0]["katas"])
    total = reports[0]["max_points"]
    head = [f"{k} (of {reports[0]['katas'][k]['max_points']:g})" for k in katas]
    with (out / "class.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", f"points (of {total:g})", *head])
        for r in reports:
            writer.writerow(
                [r["submission"], r["points"], *(r["katas"][k]["points"] for k in katas)]
            )
    lines = [
        f"# Class: {len(reports)} submissions, seed {reports[0]['seed']}",
        "",
        f"Scoring: {reports[0]['rule']}",
        "",
        f"| submission | points (of {total:g}) | " + " | ".join(head) + " |",
        "| --- | --- | " + " | ".join("---" for _ in katas) + " |",
    ]
    for r in reports:
        cells = [f"{r['katas'][k]['points']:g}" + _mark(r["katas"][k]) for k in katas]
        lines.append(f"| {r['submission']} | {r['points']:g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "⚠: zero for a reason (a crash, a rule broken, not submitted); ⏱: a test timed out or "
        "the run was stopped at its limit (the tests that finished count). Each submission's "
        "summary.md says which.",
        "",
    ]
    lines.append("![scores](scores.png)" if histogram(reports, out / "scores.png") else "")
    (out / "class.md").write_text("\n".join(lines) + "\n")


def _mark(entry: dict) -> str:
    if entry["reason"] is None:
        return ""
    return " ⚠" if entry["zeroed"] else " ⏱"


def histogram(reports: list[dict], path: Path) -> bool:
    """A histogram of the class's points; False (and a note) where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no scores.png (pip install matplotlib)")
        return False
    total = reports[0]["max_points"]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    ax.hist([r["points"] for r in reports], bins=20, range=(0, total), color="#4C72B0")
    ax.set(xlabel=f"points (out of {total:g})", ylabel="submissions", xlim=(0, total))
    ax.set_title(f"{len(reports)} submissions")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def gradescope(report: dict) -> dict:
    """Gradescope's results.json: one entry per kata part (its points, and the failing tests'
    messages as output), the overall score, and the scoring rule."""
    tests = []
    for kata, e in report["katas"].items():
        if e["reason"] is not None and not e["levels"]:
            tests.append(_gs_test(kata, 0.0, e["max_points"], e["reason"]))
            continue
        parts = {p: v for p, v in e["levels"].items() if v["score"] is not None}
        weights = {p: e["weights"].get(p, 1.0) for p in parts}
        for part, counts in parts.items():
            share = e["max_points"] * weights[part] / sum(weights.values())
            measured = counts["passed"] + counts["failed"]
            fraction = counts["passed"] / measured  # the level's score, before its rounding
            if round(fraction, 4) != counts["score"]:  # all-or-nothing: 0 or 1
                fraction = counts["score"]
            earned = 0.0 if e["zeroed"] else share * fraction
            failing = [t for t in e["tests"] if t.get("part") == part and t["status"] in FAILING]
            output = "\n\n".join(f"{t['id']}\n{t['message']}" for t in failing)
            if e["reason"]:
                output = f"{e['reason']}\n\n{output}"
            name = f"{kata}: {part_name(part)} ({counts['passed']}/{measured} tests)"
            tests.append(_gs_test(name, earned, share, output))
    return {
        "score": report["points"],
        "output": f"Seed {report['seed']}. Scoring: {report['rule']}",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def _gs_test(name: str, score: float, max_score: float, output: str) -> dict:
    return {
        "name": name,
        "score": round(score, 4),
        "max_score": round(max_score, 4),
        "output": output,
        "visibility": "visible",
    }


def kata_entry(run: dict | None, spec) -> dict:
    """The pinned per-kata shape of grade.json, scored by the assignment's `spec`; None: the
    submission has no file for the kata."""
    if run is None:
        return dict(
            score=0.0, points=0.0, max_points=spec.points, passed=0, failed=0, levels={},
            weights={}, reason="not submitted", zeroed=True, tests=[],
        )  # fmt: skip
    score, levels = score_kata(run["tests"], spec, run["zeroed"])
    graded = [t for t in run["tests"] if spec.levels is None or t["part"] in spec.levels]
    entry = dict(
        score=round(score, 4),
        points=round(score * spec.points, 4),
        max_points=spec.points,
        passed=sum(t["status"] == "passed" for t in graded),
        failed=sum(t["status"] in ("failed", "error") for t in graded),
        levels=levels,
        weights={p: spec.weights.get(p, 1.0) for p, v in levels.items() if v["score"] is not None},
        reason=run["reason"],
        zeroed=run["zeroed"],
        cpu_s=run.get("cpu_s", 0.0),
        tests=run["tests"],
    )
    if run.get("attempts", 1) > 1:
        entry["retried"] = (
            f"the worker grading it was lost; graded again ({run['attempts']} attempts)"
        )
    return entry


def submission_report(name: str, runs: dict, plan: Assignment, seed: int, env: dict) -> dict:
    katas = {kata: kata_entry(runs.get(kata), spec) for kata, spec in plan.katas.items()}
    # Summed before rounding: six katas of 16.6667 points each would make 100.0002.
    exact = [
        score_kata(runs[kata]["tests"], spec, runs[kata]["zeroed"])[0] * spec.points
        for kata, spec in plan.katas.items()
        if runs.get(kata) is not None
    ]
    points = round(sum(exact), 4)
    return {
        "submission": name,
        "seed": seed,
        "environment": env,
        "score": round(points / plan.total, 4) if plan.total else 0.0,
        "points": points,
        "max_points": plan.total,
        "rule": plan.rule(),
        "katas": katas,
    }
