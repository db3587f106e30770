"""Verdicts a learner can trust: the profiles keep unchanged code green.

The references on random examples: tests/test_grade.py grades every reference with a fresh seed
in each self-test run (test_every_reference_scores_full_marks, which prints the seed to replay);
`nox -s references` runs every reference under the `thorough` profile with five seeds.
"""

from __future__ import annotations

from hypothesis import settings


def test_profiles_promise_what_the_readme_says():
    dev, ci, thorough = (settings.get_profile(name) for name in ("dev", "ci", "thorough"))
    for profile in (dev, ci):
        assert profile.derandomize and profile.database is None, "same code, same verdict"
    assert not thorough.derandomize and thorough.database is not None, "thorough explores"
    for profile in (dev, ci, thorough):
        assert not profile.report_multiple_bugs, "one failure per test"
