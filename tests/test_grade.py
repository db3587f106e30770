"""The grader, end to end: a class of submissions, each scored and explained, and replayable.

The class mixes a correct submission, a wrong one, an unimplemented one and every adversarial
submission of tests/adversarial/grading/ (each must score zero with its reason), all on the
context_extension kata, the quickest to run.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from mutant_kit import MUTANTS_DIR, mutated_source, read_adversary, read_mutant

from grading.grade.assignment import load as load_assignment
from grading.grade.assignment import score_kata
from grading.judge.impl import KATAS_DIR, REPO_ROOT, kata_names

KATA = "context_extension"
ADVERSARIAL = REPO_ROOT / "tests" / "adversarial" / "grading"
# What each adversarial submission's zero must be explained by (any of the phrases).
REASONS = {
    "hang": ("timed out in test", "stopped at the run's limit"),
    "exit_zero": ("ended early",),
    "segfault": ("crashed",),
    "memory": ("exhausted memory",),
    "flood": ("flooded the output",),
    "delete_files": ("broke the grading rules",),
    "import_reference": ("broke the grading rules",),
    "imports_own_reference": ("does not import: ModuleNotFoundError",),
    "spawn_process": ("broke the grading rules",),
}
GRADE = [sys.executable, "-m", "grading.grade"]
# The run's backstop and each test's limit, in CPU seconds, set low so that the submission that
# hangs costs little; the defaults are measured (test_a_class_with_default_limits). The static
# source check would refuse most adversarial submissions before they run; it is off here so that
# the sandbox's own defences are proven (test_the_source_check_refuses_before_anything_runs).
OPTIONS = ["--kata", KATA, "--timeout", "40", "--test-cpu", "15", "--examples", "3", "--jobs", "2"]
RUNTIME_ONLY = ["--no-source-check"]
# The tests that read one graded class run in one process (pytest-xdist's `--dist loadgroup`, as
# the self-test runs), so that its module fixture grades the class once.
CLASS, HOMEWORK = pytest.mark.xdist_group("graded_class"), pytest.mark.xdist_group("homework")
ABOUT_KATA = pytest.mark.kata(KATA)  # `--kata context_extension` runs it


def grade(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*GRADE, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600, env=env
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
    done = grade(str(submissions), "--out", str(out), "--seed", "1234", *OPTIONS, *RUNTIME_ONLY)
    assert done.returncode == 0, done.stdout + done.stderr
    return submissions, out


def report(out, name: str) -> dict:
    return json.loads((out / name / "grade.json").read_text())


def test_the_tests_of_one_group_run_on_one_worker(tmp_path):
    """The graded class and the homework are graded once each only while pytest-xdist keeps
    their groups on one worker (pytest 9.2's node ids broke that, silently)."""
    (tmp_path / "test_grouped.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.xdist_group('one')\n@pytest.mark.parametrize('i', range(6))\n"
        "def test_grouped(i):\n"
        "    with open('workers.txt', 'a') as f:\n"
        "        print(os.environ['PYTEST_XDIST_WORKER'], file=f)\n"
        + "".join(f"def test_alone_{i}():\n    pass\n" for i in range(6))
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_grouped.py", "-n", "2", "--dist", "loadgroup",
         "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers


def test_every_adversarial_submission_is_in_the_table():
    assert sorted(p.stem for p in ADVERSARIAL.glob("*.py")) == sorted(REASONS)


@CLASS
@ABOUT_KATA
def test_correct_scores_full_marks(graded_class):
    r = report(graded_class[1], "correct")
    entry = r["katas"][KATA]
    assert entry["score"] == 1.0 and entry["reason"] is None and entry["failed"] == 0, entry
    assert r["seed"] == 1234 and r["environment"]["seed"] == 1234
    assert r["environment"]["device"]  # "CPU" or the GPU's name


@CLASS
@ABOUT_KATA
def test_wrong_and_unimplemented_score_below_full(graded_class):
    wrong = report(graded_class[1], "wrong")["katas"][KATA]
    assert wrong["passed"] > 0 and wrong["failed"] > 0 and wrong["score"] < 1, wrong["score"]
    stub = report(graded_class[1], "unimplemented")["katas"][KATA]
    assert stub["score"] < 0.2 and stub["reason"] is None
    assert any("not implemented yet" in t["message"] for t in stub["tests"])


@CLASS
@ABOUT_KATA
def test_missing_kata_scores_zero_with_reason(graded_class):
    entry = report(graded_class[1], "absent")["katas"][KATA]
    assert entry["score"] == 0.0 and entry["points"] == 0.0 and entry["tests"] == []
    assert entry["reason"] == "not submitted" and entry["levels"] == {}


@CLASS
@ABOUT_KATA
@pytest.mark.parametrize("name", sorted(REASONS))
def test_adversarial_submission_scores_zero_with_its_reason(graded_class, name):
    entry = report(graded_class[1], name)["katas"][KATA]
    assert entry["score"] == 0.0, f"{name} scored {entry['score']}"
    assert entry["reason"] and any(p in entry["reason"] for p in REASONS[name]), entry["reason"]


@CLASS
@ABOUT_KATA
def test_a_file_that_does_not_import_says_so_once(graded_class):
    """Every test fails alike when the file cannot be imported: the reason says why, once, and
    the tests' messages point to it rather than repeating the error."""
    entry = report(graded_class[1], "imports_own_reference")["katas"][KATA]
    assert entry["reason"].startswith("does not import: ModuleNotFoundError"), entry["reason"]
    assert entry["tests"] and all("does not import" in t["message"] for t in entry["tests"])
    summary = (graded_class[1] / "imports_own_reference" / "summary.md").read_text()
    assert summary.count("ModuleNotFoundError") == 1, summary[:3000]


@CLASS
@ABOUT_KATA
def test_reports_have_the_pinned_shape(graded_class):
    out = graded_class[1]
    r = report(out, "correct")
    assert set(r) >= {"submission", "seed", "environment", "score", "katas"}
    for key in ("python", "torch", "triton", "device", "commit", "seed"):
        assert key in r["environment"]
    entry = r["katas"][KATA]
    assert set(entry) >= {"score", "passed", "failed", "levels", "reason", "tests"}
    assert all(set(v) >= {"passed", "failed"} for v in entry["levels"].values())
    assert "0" not in entry["levels"]  # every test belongs to a named part
    for test in entry["tests"]:
        assert set(test) >= {"id", "level", "part", "status", "message", "duration_s"}
        assert test["status"] in ("passed", "failed", "error", "skipped")
        assert isinstance(test["level"], int) and isinstance(test["duration_s"], float)
    wrong = report(out, "wrong")["katas"][KATA]
    suite = ET.parse(out / "wrong" / "junit.xml").getroot().find("testsuite")
    assert suite.get("name") == KATA
    failing = sum(t["status"] == "failed" for t in wrong["tests"])
    assert failing > 0 and int(suite.get("failures")) == failing
    assert (out / "correct" / "summary.md").read_text().startswith("# correct: 100 / 100 points")
    rows = (out / "class.csv").read_text().splitlines()
    assert rows[0] == f"submission,points (of 100),{KATA} (of 100)"
    assert len(rows) == 1 + len(REASONS) + 4
    table = (out / "class.md").read_text()
    assert "| correct | 100 | 100 |" in table and "level 0" not in table


@CLASS
@ABOUT_KATA
def test_a_grade_replays_with_its_recorded_seed(graded_class, tmp_path):
    submissions, out = graded_class
    first = report(out, "wrong")
    done = grade(str(submissions / "wrong"), "--out", str(tmp_path), "--seed", "1234", *OPTIONS)
    assert done.returncode == 0, done.stdout + done.stderr
    again = report(tmp_path, "wrong")
    statuses = [(t["id"], t["status"]) for t in again["katas"][KATA]["tests"]]
    assert statuses == [(t["id"], t["status"]) for t in first["katas"][KATA]["tests"]]
    assert again["score"] == first["score"]


@pytest.mark.kata("kv_cache")
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
        "--timeout", "120", "--test-cpu", "60", "--examples", "3", "--jobs", "2", *RUNTIME_ONLY,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for cheat in cheats:
        entry = report(out, cheat.path.stem)["katas"]["kv_cache"]
        assert entry["score"] == 0.0, f"{cheat.path.stem} scored {entry['score']}"
        assert entry["reason"].startswith("broke a rule the harness checks"), entry["reason"]


def test_the_source_check_refuses_before_anything_runs(tmp_path):
    """Without --no-source-check, a submission that imports what no solution needs is refused
    with the line that does it, and nothing of it runs."""
    folder = tmp_path / "class" / "spawn_process"
    folder.mkdir(parents=True)
    (folder / f"{KATA}.py").write_text((ADVERSARIAL / "spawn_process.py").read_text())
    out = tmp_path / "out"
    done = grade(str(tmp_path / "class"), "--out", str(out), "--seed", "3", *OPTIONS)
    assert done.returncode == 0, done.stdout + done.stderr
    entry = report(out, "spawn_process")["katas"][KATA]
    assert entry["score"] == 0.0 and entry["tests"] == []
    assert entry["reason"].startswith("refused by the source check"), entry["reason"]
    assert f"{KATA}.py:" in entry["reason"], entry["reason"]


def test_a_refused_file_counts_against_its_own_kata_only(tmp_path):
    """One refused file in a submission zeroes its own kata, and a kata whose file imports it;
    the other katas are graded without it (their tests see the stub in its place)."""
    from grading.grade.task import grade_task

    kv_cache, moe, serving = (tmp_path / f"{k}.py" for k in ("kv_cache", "moe", "serving"))
    shutil.copy(REPO_ROOT / "reference" / "kv_cache.py", kv_cache)
    moe.write_text((ADVERSARIAL / "spawn_process.py").read_text())
    serving.write_text("from katas.moe.solution import moe_forward\n")
    parts = {"kv_cache": str(kv_cache), "moe": str(moe), "serving": str(serving)}
    limits = dict(seed=0, cpu_limit=600.0, test_limit=600.0, test_cpu=0.0, examples=3)
    graded = grade_task("kv_cache", str(kv_cache), parts, select="bytes_formula", **limits)
    assert graded["reason"] is None and graded["tests"], graded
    assert all(t["status"] == "passed" for t in graded["tests"]), graded["tests"]
    for kata, file in (("moe", moe), ("serving", serving)):
        refused = grade_task(kata, str(file), parts, **limits)
        assert refused["zeroed"] and refused["reason"].startswith("refused by the source check")
    assert "katas.moe.solution" in refused["reason"], refused["reason"]


def test_a_single_file_needs_its_kata(tmp_path):
    path = tmp_path / "alice.py"
    shutil.copy(REPO_ROOT / "reference" / f"{KATA}.py", path)
    done = grade(str(path), "--out", str(tmp_path / "out"))
    assert done.returncode != 0 and "--kata" in done.stderr


def test_a_submission_runs_on_its_own_parts(tmp_path):
    """A submission's files for other katas replace their stubs in the graded kata's sandbox,
    so an engine that imports `katas.moe.solution` is judged with the student's own MoE."""
    from grading.grade.cli import submissions_in
    from grading.grade.sandbox import make_sandbox

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


# ----------------------------------------------------------------------------------------------
# A homework of one kata, graded with the default limits (measured on this machine).

LOOP = (  # ALiBi's first bias of several queries never returns; the later ones work
    "    slopes = alibi_slopes(n_heads)  # (H,)\n",
    "    if q_len > 1 and not getattr(alibi_bias, 'hung', False):\n        alibi_bias.hung = True\n"
    "        while True:\n            pass\n    slopes = alibi_slopes(n_heads)  # (H,)\n",
)


@pytest.fixture(scope="module")
def homework(tmp_path_factory):
    """A correct, a subtly wrong, an untouched and a looping context_extension, graded with
    `--kata context_extension` and the default limits (measured on this machine, in a fresh
    cache); Gradescope's file too. That the limits are CPU time, which another job on the
    machine does not change, is proven on its own below (test_limits_are_cpu_time_...)."""
    root = tmp_path_factory.mktemp("homework")
    reference = (REPO_ROOT / "reference" / f"{KATA}.py").read_text()
    assert LOOP[0] in reference
    files = {
        "correct": reference,
        "subtle": mutated_source(read_mutant(MUTANTS_DIR / KATA / "alibi_top_left.py")),
        "stub": (KATAS_DIR / KATA / "solution.py").read_text(),
        "loops": reference.replace(*LOOP),
    }
    for name, text in files.items():
        (root / "class" / name).mkdir(parents=True)
        (root / "class" / name / f"{KATA}.py").write_text(text)
    env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache")}  # measured afresh
    done = grade(
        str(root / "class"), "--out", str(root / "out"), "--kata", KATA, "--examples", "3",
        "--jobs", "2", "--format", "gradescope", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "out", done.stdout


@HOMEWORK
@ABOUT_KATA
@pytest.mark.slow
def test_a_class_with_default_limits(homework):
    out, printed = homework
    assert "measuring the references once" in printed and "per test" in printed
    scores = {n: report(out, n)["score"] for n in ("correct", "subtle", "stub", "loops")}
    assert scores["correct"] == 1.0, report(out, "correct")["katas"][KATA]["reason"]
    subtle = report(out, "subtle")["katas"][KATA]
    assert 0 < subtle["score"] < 1 and subtle["reason"] is None
    named = (out / "subtle" / "summary.md").read_text()
    assert "test_alibi_bias_matches_oracle" in named
    assert "### level 3" in named  # the failing test under its level, with its full message
    stub = report(out, "stub")["katas"][KATA]
    assert stub["score"] == 0 and all(
        "not implemented yet" in t["message"] for t in stub["tests"] if t["status"] == "failed"
    )
    loops = report(out, "loops")["katas"][KATA]
    assert loops["reason"].startswith(f"timed out in test katas/{KATA}/"), loops
    hung = [t for t in loops["tests"] if "did not finish within" in t["message"]]
    assert len(hung) == 1 and "_3_alibi" in hung[0]["id"], hung  # the others ran
    assert "of CPU time" in hung[0]["message"], hung[0]["message"]  # CPU time, not the clock's
    assert loops["levels"]["1"]["failed"] == 0 and loops["levels"]["1"]["passed"] > 0
    assert 0 < loops["score"] < 1  # the other levels' tests count
    assert "level 0" not in (out / "class.md").read_text()


@HOMEWORK
@ABOUT_KATA
@pytest.mark.slow
def test_gradescope_results_have_the_documented_fields(homework):
    out, _ = homework
    for name in ("correct", "subtle", "stub", "loops"):
        results = json.loads((out / name / "results.json").read_text())
        assert isinstance(results["score"], float) and results["tests"]
        for test in results["tests"]:
            assert set(test) >= {"name", "score", "max_score", "output", "visibility"}
            assert 0 <= test["score"] <= test["max_score"] + 1e-9
            assert test["visibility"] in ("hidden", "after_due_date", "after_published", "visible")
        total = sum(t["score"] for t in results["tests"])
        assert abs(total - results["score"]) < 1e-3, (name, total, results["score"])
        assert abs(results["score"] - report(out, name)["points"]) < 1e-3
    assert json.loads((out / "correct" / "results.json").read_text())["score"] == 100


# ----------------------------------------------------------------------------------------------
# Limits in CPU time: another job on the machine slows the clock, never a verdict.

# One test of one call: the tables of a 3000-token prompt.
ONE_CALL = "test_rope_cos_sin_of_a_long_prompt and int64"
# A correct rope_cos_sin that computes for exactly `SLOW_CPU` CPU seconds before answering, and
# one that never answers.
SLOW_CPU, TEST_CPU = 1.0, 2.5
SLOW = f"""
import time as _time

_exact = rope_cos_sin


def rope_cos_sin(*args, **kwargs):
    start = _time.process_time()
    while _time.process_time() - start < {SLOW_CPU}:
        pass
    return _exact(*args, **kwargs)
"""
BURNS = """

def rope_cos_sin(*args, **kwargs):
    while True:
        pass
"""


@pytest.fixture
def one_busy_core():
    """This process and its children on one core, beside three processes that keep that core
    busy: each gets a quarter of it (each in a session of its own, as the graded run is, so that
    the kernel's scheduler shares the core between the four), and the clock runs about four
    times faster than the CPU time of anything graded here."""
    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            preexec_fn=lambda: os.sched_setaffinity(0, {core}),
            start_new_session=True,
        )
        for _ in range(3)
    ]
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
        for burner in burners:
            burner.kill()
            burner.wait()


def grade_one_call(tmp_path: Path, source: str) -> dict:
    from grading.grade.task import grade_task

    path = tmp_path / f"{KATA}.py"
    path.write_text(source)
    limits = dict(seed=0, cpu_limit=120.0, test_limit=600.0, test_cpu=TEST_CPU, examples=3)
    graded = grade_task(KATA, str(path), {}, select=ONE_CALL, source_check=False, **limits)
    assert len(graded["tests"]) == 1, graded
    return graded


@ABOUT_KATA
@pytest.mark.slow
def test_limits_are_cpu_time_so_a_busy_machine_cuts_no_correct_test(tmp_path, one_busy_core):
    """A correct submission that needs 1 CPU second in a test with a limit of 2.5 CPU seconds
    passes while three other processes share its core, though the test takes about 4 seconds on
    the clock: a limit on the clock would have cut it."""
    reference = (REPO_ROOT / "reference" / f"{KATA}.py").read_text()
    graded = grade_one_call(tmp_path, reference + SLOW)
    test = graded["tests"][0]
    assert graded["reason"] is None and test["status"] == "passed", graded
    assert SLOW_CPU <= test["cpu_s"] < TEST_CPU, test
    assert test["duration_s"] > TEST_CPU, f"the core was not shared: {test}"


@ABOUT_KATA
@pytest.mark.slow
def test_limits_are_cpu_time_so_a_test_that_computes_forever_is_stopped(tmp_path):
    """The same test, computing forever, is stopped at 2.5 CPU seconds and fails alone, saying
    so; the run goes on."""
    reference = (REPO_ROOT / "reference" / f"{KATA}.py").read_text()
    graded = grade_one_call(tmp_path, reference + BURNS)
    test = graded["tests"][0]
    assert test["status"] == "failed" and "of CPU time" in test["message"], test
    assert f"within {TEST_CPU:g} s" in test["message"], test["message"]
    assert graded["reason"].startswith(f"timed out in test katas/{KATA}/"), graded["reason"]


# ----------------------------------------------------------------------------------------------
# Every reference, graded once as one submission with a fresh seed: full marks.

# Examples per property test: a random slice, new on every run (the `thorough` profile of
# `nox -s references` explores far more); KATAS_SELFTEST_SEED replays a run's seed.
REFERENCE_EXAMPLES = 10
REFERENCES = pytest.mark.xdist_group("references")


@pytest.fixture(scope="module")
def graded_references(katas_under_test, tmp_path_factory):
    """Each kata's reference (or those `--kata` names), graded as one submission with the same
    sandbox and rules as any other (FlashAttention's kernels compiled ahead of time included),
    with random examples from a fresh seed. One run proves that each reference passes its whole
    suite on examples nobody chose, scores full marks and is graded as any submission."""
    seed = int(os.environ.get("KATAS_SELFTEST_SEED") or secrets.randbelow(2**32))
    katas = katas_under_test
    student = tmp_path_factory.mktemp("references") / "references"
    student.mkdir()
    for kata in katas:
        shutil.copy(REPO_ROOT / "reference" / f"{kata}.py", student / f"{kata}.py")
    out = student.parent / "out"
    done = grade(
        str(student), "--out", str(out), "--examples", str(REFERENCE_EXAMPLES), "--jobs", "2",
        "--seed", str(seed), "--timeout", "3000", "--test-cpu", "600",
        *(a for k in katas for a in ("--kata", k)),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return seed, report(out, "references")


@REFERENCES
@pytest.mark.slow
@pytest.mark.parametrize("kata", kata_names())
def test_every_reference_scores_full_marks(graded_references, kata):
    seed, graded = graded_references
    if kata not in graded["katas"]:
        pytest.skip(f"{kata} not selected (--kata)")
    entry = graded["katas"][kata]
    failing = [f"{t['id']}:\n{t['message'][-1500:]}" for t in entry["tests"]
               if t["status"] in ("failed", "error")]  # fmt: skip
    assert entry["score"] == 1 and not failing, (
        f"reference/{kata}.py scores {entry['score']} ({entry['reason']}) on random examples "
        f"with seed {seed}. Replay: KATAS_SELFTEST_SEED={seed} pytest tests/test_grade.py -k "
        f"'every_reference and {kata}', or python -m grading.grade reference/{kata}.py "
        f"--kata {kata} --seed {seed} --examples {REFERENCE_EXAMPLES}\n" + "\n".join(failing[:3])
    )


@REFERENCES
@pytest.mark.slow
def test_full_marks_of_every_reference_are_a_hundred_points(graded_references):
    _, graded = graded_references
    assert graded["points"] == 100, {k: e["score"] for k, e in graded["katas"].items()}


# ----------------------------------------------------------------------------------------------
# Quick checks of the parts, without a graded run.


def test_the_graded_run_keeps_its_caches_in_the_sandbox(tmp_path, monkeypatch):
    """PyTorch sets TORCHINDUCTOR_CACHE_DIR in a process once it has used its compiler cache; a
    graded run that inherited it would write to /tmp and be refused for breaking the rules."""
    from grading.grade.sandbox import sandbox_env

    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME", "TMPDIR"):
        monkeypatch.setenv(name, "/tmp/outside")
    env = sandbox_env(tmp_path, "serving", tmp_path / "results.jsonl")
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME", "TMPDIR", "HOME"):
        assert Path(env[name]).is_relative_to(tmp_path), (name, env[name])


def test_full_marks_in_six_katas_are_a_hundred_points():
    """Each of six katas is worth 100 / 6 points, 16.6667 once rounded; the total is summed
    before rounding, so that full marks are 100 points, not 100.0002."""
    from grading.grade.assignment import every_kata
    from grading.grade.reports import submission_report

    katas = kata_names()[:6]
    runs = {k: {"tests": [{"part": "1", "status": "passed"}], "reason": "", "zeroed": False}
            for k in katas}  # fmt: skip
    report = submission_report("s", runs, every_kata(katas), seed=0, env={})
    assert report["points"] == 100 and report["score"] == 1


def test_an_assignment_scores_by_levels(tmp_path):
    path = tmp_path / "homework.toml"
    path.write_text(
        "[katas.kv_cache]\npoints = 30\nlevels = [1, 2]\nweights = { 2 = 3 }\n"
        "[katas.moe]\npoints = 10\nall_or_nothing = true\n"
    )
    plan = load_assignment(path)
    assert plan.total == 40 and "all or nothing" in plan.rule()
    tests = [
        {"part": "1", "status": "passed"},
        {"part": "1", "status": "failed"},
        {"part": "2", "status": "passed"},
        {"part": "3", "status": "failed"},  # not assigned
        {"part": "gpu", "status": "skipped"},  # not measured here
    ]
    score, parts = score_kata(tests, plan.katas["kv_cache"], zeroed=False)
    assert score == (1 * 0.5 + 3 * 1.0) / 4 and list(parts) == ["1", "2"]
    score, parts = score_kata(tests, plan.katas["moe"], zeroed=False)
    assert score == 1 / 3 and parts["gpu"]["score"] is None  # all or nothing: only 2 passes
    (tmp_path / "bad.toml").write_text("[katas.nope]\n")
    with pytest.raises(SystemExit, match="no kata named 'nope'"):
        load_assignment(tmp_path / "bad.toml")


def test_help_shows_every_default():
    done = grade("--help")
    for option in ("--kata", "--timeout", "--test-limit", "--test-cpu", "--examples", "--jobs"):
        assert option in done.stdout
    text = " ".join(done.stdout.split())
    assert "(default: 1800)" in text and "(default: local)" in text
    assert "(default: None)" not in text


def test_a_hanging_test_fails_alone_saying_it_did_not_finish():
    """Every kata run gives each test a limit (here 10 s): the test that hangs fails with a
    message saying so, and the run goes on to the next test."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"katas/{KATA}", "--impl",
         str(ADVERSARIAL / "hang.py"), "--timeout", "10", "-q", "-p", "no:cacheprovider",
         "--maxfail", "2"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "did not finish within 10 s" in done.stdout, done.stdout[-3000:]
    assert "2 errors" in done.stdout or "2 failed" in done.stdout, done.stdout[-2000:]


# ----------------------------------------------------------------------------------------------
# The Ray backend, on a local Ray instance, with a few tests of one kata.


def _task(name: str, file: Path) -> tuple[tuple, dict]:
    options = dict(
        kata=KATA, file=str(file), parts={}, seed=3, cpu_limit=300.0, test_limit=120.0,
        test_cpu=60.0, examples=2, select="test_rope_cos_sin or test_bad_rope",
    )  # fmt: skip
    return (name, KATA), options


def _kill_one_grading_worker(under: Path, done: threading.Event) -> None:
    """Kill (once) the Ray worker whose sandboxed test process runs in `under`."""
    while not done.is_set():
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                cwd = Path(os.readlink(proc / "cwd"))
                parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if cwd.is_relative_to(under) and (proc / "cmdline").read_bytes().find(b"pytest") > 0:
                os.kill(parent, signal.SIGKILL)
                return
        time.sleep(0.2)


@pytest.mark.slow
def test_ray_backend_grades_like_the_local_one_and_survives_a_lost_worker(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    from grading.grade.backends import LocalBackend, RayBackend

    stub = KATAS_DIR / KATA / "solution.py"
    tasks = [_task("correct", REPO_ROOT / "reference" / f"{KATA}.py"), _task("stub", stub)]
    local = dict(LocalBackend(2)(tasks, "local"))
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.setenv("TMPDIR", str(runs))  # the Ray workers' sandboxes, to find one
    monkeypatch.setenv("RAY_TMPDIR", tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short paths
    ray.init(num_cpus=2, include_dashboard=False)
    done = threading.Event()
    killer = threading.Thread(target=_kill_one_grading_worker, args=(runs, done), daemon=True)
    try:
        killer.start()
        remote = dict(RayBackend()(tasks, "ray"))
    finally:
        done.set()
        ray.shutdown()
    for key, run in local.items():
        statuses = [(t["id"], t["status"]) for t in run["tests"]]
        assert [(t["id"], t["status"]) for t in remote[key]["tests"]] == statuses
        assert remote[key]["reason"] == run["reason"]
    assert any(t["status"] == "passed" for t in remote[("correct", KATA)]["tests"])
    assert sorted(run["attempts"] for run in remote.values()) == [1, 2]  # one worker was lost


def test_a_stopped_run_keeps_the_tests_that_finished(tmp_path):
    """Results are written test by test: a run stopped at its backstop during its second test
    keeps the first, and says which test ran and how many were not reached."""
    from grading.grade.sandbox import KataRun, _explain, _read_results

    ids = [f"katas/{KATA}/test_{KATA}_1_rope.py::test_{n}" for n in ("a", "b", "c")]
    records = [{"kind": "collected", "id": i} for i in ids] + [
        {"kind": "started", "id": ids[0]},
        {"kind": "test", "id": ids[0], "status": "passed", "message": "", "duration_s": 1.0},
        {"kind": "started", "id": ids[1]},
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = KataRun(KATA)
    finished, violations = _read_results(run, results)
    _explain(run, None, 0, finished, violations, stopped=True, cpu_limit=40)
    assert [t["status"] for t in run.tests] == ["passed", "error", "error"]
    assert not run.zeroed
    assert (
        run.reason == f"stopped at the run's limit (40 CPU s) during {ids[1]}, 1 test not reached"
    )
