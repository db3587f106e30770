"""A failure message must name the mistake that caused it, not a symptom far from it.

Each case runs one mutant of tests/mutants/ (a one-line learner mistake) through the test that
catches it, and checks what the learner reads: the words that point at the real mistake, and
none of the words that used to point elsewhere.
"""

from __future__ import annotations

import re

import pytest
from mutant_kit import MUTANTS_DIR, judge, read_mutant

# mutant: (text the failure must contain, text it must not contain)
MESSAGES = {
    # The cache never cropped: the next slice of unread tokens comes out empty, and the model
    # used to say "positions 9..8 must lie in 0..255".
    "speculative_decoding/target_cache_not_cropped": (
        r"cropped",
        r"positions \d+\.\.\d+ must lie",
    ),
    # Sampling from p after a rejection makes outcomes the target never makes: a G statistic of
    # inf against a "bound" of 0.0 said nothing.
    "speculative_decoding/resample_from_p": (
        r"has probability 0 under the exact distribution, yet came out \d+ times",
        r"G = inf|> 0\.0 at significance",
    ),
    # One proposal too few per round: the calls, round by round, against the schedule, instead
    # of a guess about bonus tokens.
    "speculative_decoding/round_of_k_minus_one": (
        r"target's call \d+ fed \d+ tokens at cache length \d+; the schedule feeds \d+",
        r"no bonus token",
    ),
}


@pytest.mark.parametrize("name", MESSAGES)
def test_the_failure_names_the_real_mistake(name, tmp_path):
    must, must_not = MESSAGES[name]
    mutant = read_mutant(MUTANTS_DIR / f"{name}.py")
    verdict = judge(mutant, tmp_path, "--hypothesis-profile=ci")  # shrunk, as a learner reads it
    assert verdict.caught_by(mutant.caught_by), f"{name} was not caught:\n{verdict.output[-3000:]}"
    assert re.search(must, verdict.output), (
        f"{name}: the failure should say {must!r}; it said:\n{verdict.output[-3000:]}"
    )
    assert not re.search(must_not, verdict.output), (
        f"{name}: the failure still says {must_not!r}, which points away from the mistake:\n"
        f"{verdict.output[-3000:]}"
    )
