"""Every wrong implementation in tests/mutants/<kata>/ must be caught by the test it names.

A mutant (see tests/mutant_kit.py) is a small patch on reference/<kata>.py with `CAUGHT_BY`, the
tests written to catch that bug. Failing some unrelated test is not enough: a mutant caught only
by accident proves nothing about the test it was written for.
"""

from __future__ import annotations

import ast
import re

import pytest
from mutant_kit import (
    MUTANTS_DIR,
    Mutant,
    all_mutants,
    mutated_source,
    read_mutant,
)

from grading.judge.impl import KATAS_DIR, kata_names

MUTANTS = all_mutants()
IDS = [f"{p.parent.name}/{p.stem}" for p in MUTANTS]
# The least each kata's corpus holds: the bugs learners are known to make.
MINIMUM = {
    "batching": 40,
    "context_extension": 43,
    "efficient_attention": 63,
    "flash_attention": 48,
    "kv_cache": 70,
    "moe": 53,
    "speculative_decoding": 55,
    "serving": 63,
}
DEFAULT_MINIMUM = 12


def defined_tests(kata: str) -> set[str]:
    """Names of the test functions defined in the kata's test files."""
    names = set()
    for path in (KATAS_DIR / kata).glob("test_*.py"):
        names |= set(re.findall(r"^\s*def (test_\w+)\(", path.read_text(), flags=re.M))
    return names


@pytest.mark.parametrize("kata", kata_names())
def test_each_kata_has_a_corpus(kata):
    found = all_mutants(kata)
    need = MINIMUM.get(kata, DEFAULT_MINIMUM)
    assert len(found) >= need, f"tests/mutants/{kata}/ has {len(found)} mutants, needs {need}"


@pytest.mark.parametrize("path", MUTANTS, ids=IDS)
def test_mutant_is_well_formed(path):
    mutant = read_mutant(path)
    assert mutant.doc.startswith("Bug: "), f"{path.name}: its docstring must start with 'Bug: '"
    unknown = set(mutant.caught_by) - defined_tests(mutant.kata)
    assert not unknown, f"{mutant.name}: CAUGHT_BY names no test of katas/{mutant.kata}: {unknown}"
    source = mutated_source(mutant)  # raises StaleMutant if stale
    assert source != mutant.reference.read_text()
    try:
        ast.parse(source)
    except SyntaxError as error:
        pytest.fail(
            f"{mutant.name}: the patched reference is not Python ({error}), so it fails "
            "on import and proves nothing about the tests it names"
        )


@pytest.mark.parametrize("path", MUTANTS, ids=IDS)
def test_mutant_is_caught(path, tmp_path, warm_judge):
    mutant = read_mutant(path)
    verdict = warm_judge.judge(mutant, tmp_path)
    assert verdict.caught_by(mutant.caught_by), (
        f"{path.relative_to(MUTANTS_DIR)} ({mutant.bug}) was not caught by "
        f"{' or '.join(mutant.caught_by)} (exit code {verdict.returncode}; failed: "
        f"{verdict.failed or 'none'}):\n{verdict.output[-3000:]}"
    )
    assert "not implemented yet" not in verdict.output, f"{path.name} fails only as unimplemented"


def test_the_warm_judge_passes_a_harmless_edit(tmp_path, warm_judge):
    """A copy of the reference is not caught: "caught" comes from the mutant, not the judge."""
    harmless = Mutant(
        path=tmp_path / "harmless.py",
        kata="context_extension",
        doc="Bug: none; a comment added to the reference.",
        caught_by=("test_alibi_bias_known_values",),
        edits=(("import math\n", "import math  # unchanged\n"),),
    )
    verdict = warm_judge.judge(harmless, tmp_path)
    assert verdict.returncode == 0 and not verdict.failed, verdict.output[-3000:]
    assert not verdict.caught_by(harmless.caught_by)
