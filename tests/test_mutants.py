"""Every wrong implementation in tests/mutants/<kata>/ must make its kata's tests fail."""

from __future__ import annotations

import ast

import pytest

from grading.impl import REPO_ROOT, kata_names

MUTANTS_DIR = REPO_ROOT / "tests" / "mutants"
MUTANTS = sorted(MUTANTS_DIR.glob("*/*.py"))
# The least each kata's corpus holds: the bugs learners are known to make.
MINIMUM = {"kv_cache": 8}
DEFAULT_MINIMUM = 12


@pytest.mark.parametrize("kata", kata_names())
def test_each_kata_has_a_corpus(kata):
    found = list((MUTANTS_DIR / kata).glob("*.py"))
    need = MINIMUM.get(kata, DEFAULT_MINIMUM)
    assert len(found) >= need, f"tests/mutants/{kata}/ has {len(found)} mutants, needs {need}"


@pytest.mark.parametrize("mutant", MUTANTS, ids=[f"{p.parent.name}/{p.stem}" for p in MUTANTS])
def test_mutant_is_caught(mutant, kata_runner):
    kata = mutant.parent.name
    doc = ast.get_docstring(ast.parse(mutant.read_text())) or ""
    assert doc.startswith("Bug: "), f"{mutant.name}: its docstring must start with 'Bug: '"
    run = kata_runner(kata, "-x", f"--impl={mutant}")
    assert run.returncode == 1, (
        f"{mutant.relative_to(REPO_ROOT)} ({doc.splitlines()[0]}) was not caught by the tests of "
        f"{kata} (exit code {run.returncode}; 0 means every test passed):\n{run.tail()}"
    )
    assert "not implemented yet" not in run.output, f"{mutant.name} fails only as unimplemented"
