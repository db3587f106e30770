"""Verdicts a learner can trust: the references pass random examples under fixed seeds, and the
profiles keep unchanged code green.

`nox -s references` runs every reference under the `thorough` profile with five seeds; this is
its cheap slice for CI: the `sweep` profile (thorough's random exploration, fewer examples) with
one seed per kata.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from grading.impl import kata_names

SWEEP_SEED = "3"


@pytest.mark.parametrize("kata", kata_names())
def test_reference_passes_random_examples(kata, kata_runner):
    # Only the drawn tests (Hypothesis marks them): the others give the same verdict under every
    # profile, and the graded runs of tests/test_grade.py run them already.
    run = kata_runner(
        kata, "--impl", "reference", "--hypothesis-profile", "sweep", "--hypothesis-seed",
        SWEEP_SEED, "-m", "hypothesis",
    )  # fmt: skip
    assert run.returncode == 0, (
        f"reference/{kata}.py fails its kata's tests on random examples (seed {SWEEP_SEED}):\n"
        f"{run.tail()}"
    )


def test_profiles_promise_what_the_readme_says():
    dev, ci, thorough = (settings.get_profile(name) for name in ("dev", "ci", "thorough"))
    for profile in (dev, ci):
        assert profile.derandomize and profile.database is None, "same code, same verdict"
    assert not thorough.derandomize and thorough.database is not None, "thorough explores"
    for profile in (dev, ci, thorough):
        assert not profile.report_multiple_bugs, "one failure per test"
