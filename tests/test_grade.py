"""The grader, end to end: a class of submissions, each scored and explained, and replayable.

The class mixes a correct submission, a wrong one, an unimplemented one and every adversarial
submission of tests/adversarial/grading/ (each must score zero with its reason), all on the
context_extension kata, the quickest to run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from xml.etree import ElementTree as ET

import pytest

from grading.impl import KATAS_DIR, REPO_ROOT
from grading.mutants import MUTANTS_DIR, mutated_source, read_adversary, read_mutant

KATA = "context_extension"
ADVERSARIAL = REPO_ROOT / "tests" / "adversarial" / "grading"
# What each adversarial submission's zero must be explained by (any of the phrases).
# Those that import what no solution needs are refused before they run (grading/source_check.py).
REFUSED = "refused by the source check"
REASONS = {
    "hang": ("hung", "timed out"),
    "exit_zero": ("ended early", REFUSED),
    "segfault": ("crashed", REFUSED),
    "memory": ("exhausted memory",),
    "flood": ("flooded the output", REFUSED),
    "delete_files": ("broke the grading rules", REFUSED),
    "import_reference": ("broke the grading rules", REFUSED),
    "spawn_process": ("broke the grading rules", REFUSED),
}
GRADE = [sys.executable, "-m", "grading.grade"]
OPTIONS = ["--kata", KATA, "--timeout", "40", "--examples", "3", "--jobs", "2"]


def grade(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*GRADE, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Grade the class once; every test below reads the reports."""
    root = tmp_path_factory.mktemp("grade")
    submissions = root / "class"
    files = {
        "correct": (REPO_ROOT / "reference" / f"{KATA}.py").read_text(),
        "unimplemented": (KATAS_DIR / KATA / "solution.py").read_text(),
        "wrong": mutated_source(read_mutant(sorted((MUTANTS_DIR / KATA).glob("*.py"))[0])),
    }
    for path in sorted(ADVERSARIAL.glob("*.py")):
        files[path.stem] = path.read_text()
    for name, text in files.items():
        (submissions / name).mkdir(parents=True)
        (submissions / name / f"{KATA}.py").write_text(text)
    (submissions / "absent").mkdir()  # a submission without the kata
    out = root / "out"
    done = grade(str(submissions), "--out", str(out), "--seed", "1234", *OPTIONS)
    assert done.returncode == 0, done.stdout + done.stderr
    return submissions, out


def report(out, name: str) -> dict:
    return json.loads((out / name / "grade.json").read_text())


def test_every_adversarial_submission_is_in_the_table():
    assert sorted(p.stem for p in ADVERSARIAL.glob("*.py")) == sorted(REASONS)


def test_correct_scores_full_marks(graded_class):
    r = report(graded_class[1], "correct")
    entry = r["katas"][KATA]
    assert entry["score"] == 1.0 and entry["reason"] is None and entry["failed"] == 0, entry
    assert r["seed"] == 1234 and r["environment"]["seed"] == 1234
    assert r["environment"]["device"]  # "CPU" or the GPU's name


def test_wrong_and_unimplemented_score_below_full(graded_class):
    wrong = report(graded_class[1], "wrong")["katas"][KATA]
    assert wrong["passed"] > 0 and wrong["failed"] > 0 and wrong["score"] < 1, wrong["score"]
    stub = report(graded_class[1], "unimplemented")["katas"][KATA]
    assert stub["score"] < 0.2 and stub["reason"] is None
    assert any("not implemented yet" in t["message"] for t in stub["tests"])


def test_missing_kata_scores_zero_with_reason(graded_class):
    entry = report(graded_class[1], "absent")["katas"][KATA]
    assert entry == dict(score=0.0, passed=0, failed=0, levels={}, reason="missing", tests=[])


@pytest.mark.parametrize("name", sorted(REASONS))
def test_adversarial_submission_scores_zero_with_its_reason(graded_class, name):
    entry = report(graded_class[1], name)["katas"][KATA]
    assert entry["score"] == 0.0, f"{name} scored {entry['score']}"
    assert entry["reason"] and any(p in entry["reason"] for p in REASONS[name]), entry["reason"]


def test_reports_have_the_pinned_shape(graded_class):
    out = graded_class[1]
    r = report(out, "correct")
    assert set(r) >= {"submission", "seed", "environment", "score", "katas"}
    for key in ("python", "torch", "triton", "device", "commit", "seed"):
        assert key in r["environment"]
    entry = r["katas"][KATA]
    assert set(entry) >= {"score", "passed", "failed", "levels", "reason", "tests"}
    assert all(set(v) == {"passed", "failed"} for v in entry["levels"].values())
    for test in entry["tests"]:
        assert set(test) >= {"id", "level", "status", "message", "duration_s"}
        assert test["status"] in ("passed", "failed", "error", "skipped")
        assert isinstance(test["level"], int) and isinstance(test["duration_s"], float)
    suites = ET.parse(out / "wrong" / "junit.xml").getroot()
    assert suites.tag == "testsuites" and suites.find("testsuite").get("name") == KATA
    assert int(suites.find("testsuite").get("failures")) > 0
    assert (out / "correct" / "summary.md").read_text().startswith("# correct: 100.0 / 100")
    rows = (out / "class.csv").read_text().splitlines()
    assert rows[0] == f"submission,score,{KATA}" and len(rows) == 1 + len(REASONS) + 4
    assert "| correct | 100.0 |" in (out / "class.md").read_text()


def test_a_grade_replays_with_its_recorded_seed(graded_class, tmp_path):
    submissions, out = graded_class
    first = report(out, "wrong")
    done = grade(str(submissions / "wrong"), "--out", str(tmp_path), "--seed", "1234", *OPTIONS)
    assert done.returncode == 0, done.stdout + done.stderr
    again = report(tmp_path, "wrong")
    statuses = [(t["id"], t["status"]) for t in again["katas"][KATA]["tests"]]
    assert statuses == [(t["id"], t["status"]) for t in first["katas"][KATA]["tests"]]
    assert again["score"] == first["score"]


def test_harness_cheats_score_zero(tmp_path):
    """The guards of every test run hold while grading too: the KV-cache cheats of
    tests/adversarial/ (the others are proven against their guards in tests/test_guards.py, and
    the grader reads any guard's failure the same way)."""
    cheats = [
        read_adversary(p)[0]
        for p in sorted((REPO_ROOT / "tests" / "adversarial").glob("*.py"))
        if read_adversary(p)[0].kata == "kv_cache"
    ]
    assert len(cheats) >= 3
    for cheat in cheats:
        folder = tmp_path / "class" / cheat.path.stem
        folder.mkdir(parents=True)
        (folder / "kv_cache.py").write_text(mutated_source(cheat))
    out = tmp_path / "out"
    done = grade(
        str(tmp_path / "class"), "--out", str(out), "--seed", "5", "--kata", "kv_cache",
        "--timeout", "120", "--examples", "3", "--jobs", "2",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for cheat in cheats:
        entry = report(out, cheat.path.stem)["katas"]["kv_cache"]
        assert entry["score"] == 0.0, f"{cheat.path.stem} scored {entry['score']}"
        assert entry["reason"].startswith(("broke a rule the harness checks", REFUSED)), entry


def test_a_single_file_needs_its_kata(tmp_path):
    path = tmp_path / "alice.py"
    shutil.copy(REPO_ROOT / "reference" / f"{KATA}.py", path)
    done = grade(str(path), "--out", str(tmp_path / "out"))
    assert done.returncode != 0 and "--kata" in done.stderr


def test_a_submission_runs_on_its_own_parts(tmp_path):
    """A submission's files for other katas replace their stubs in the graded kata's sandbox,
    so an engine that imports `katas.moe.solution` is judged with the student's own MoE."""
    from grading.grade import submissions_in
    from grading.sandbox import make_sandbox

    student = tmp_path / "alice"
    student.mkdir()
    (student / "serving.py").write_text("from katas.moe.solution import route\n")
    (student / "moe.py").write_text("def route(logits, k):\n    return 'alice'\n")
    submissions, _ = submissions_in(student, "serving")
    parts = submissions["alice"]
    assert set(parts) == {"serving", "moe"}
    box = make_sandbox(tmp_path / "box", "serving", parts["serving"], parts=parts)
    assert (box / "katas" / "moe" / "solution.py").read_text() == (student / "moe.py").read_text()
    assert not (box / "reference" / "serving.py").exists()
    assert (box / "katas" / "kv_cache" / "solution.py").read_text() == (
        KATAS_DIR / "kv_cache" / "solution.py"
    ).read_text()
