"""Level 4: prompt-lookup decoding, a draft made of the context itself."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.cost import CountingModel
from grading.errors import BadCall, assert_value_error
from grading.model import greedy_generate_no_cache
from grading.strategies import lengths, seeds
from katas.speculative_decoding.cases import (
    TARGET,
    ScriptedModel,
    ideal_schedule,
    lookup_oracle,
    rounds,
    tiny_model,
)

V = 64


@pytest.mark.parametrize(
    ("ids", "k", "max_ngram", "want"),
    [
        ([1, 2, 3, 9, 1, 2, 3], 3, 3, [9, 1, 2]),  # the 3-gram [1, 2, 3] seen before
        ([1, 2, 3, 9, 1, 2, 3], 5, 3, [9, 1, 2, 3]),  # the context ends first
        ([5, 1, 7, 4, 1, 8, 4, 1], 2, 3, [8, 4]),  # [4, 1] twice: the most recent one wins
        ([2, 6, 3, 2, 7, 6, 3], 2, 3, [2, 7]),  # [6, 3] beats the more recent [3] alone
        ([4, 4, 4], 2, 3, [4]),  # [4, 4] at 0 ends before the last token
        ([1, 2, 3, 4], 3, 3, []),  # nothing repeats
        ([7], 3, 3, []),  # one token: nothing earlier
        ([1, 2, 3, 9, 1, 2, 3], 2, 1, [9, 1]),  # max_ngram = 1: only the last token
    ],
)
def test_lookup_draft_known_cases(impl, ids, k, max_ngram, want):
    got = impl.lookup_draft(torch.tensor(ids), k, max_ngram)
    assert got.dtype == torch.long and got.tolist() == want, (
        f"lookup_draft({ids}, k={k}, max_ngram={max_ngram}) should be {want}, got "
        f"{got.dtype} {got.tolist()}: the longest tail (at most max_ngram tokens) that occurs "
        "earlier, its most recent earlier occurrence, and up to k tokens after it"
    )


@given(
    ids=st.lists(st.integers(0, 3), min_size=1, max_size=30),
    k=st.integers(1, 6),
    max_ngram=st.integers(1, 4),
)
def test_lookup_draft_matches_the_oracle(impl, ids, k, max_ngram):
    want = lookup_oracle(ids, k, max_ngram)
    got = impl.lookup_draft(torch.tensor(ids, dtype=torch.long), k, max_ngram)
    assert got.tolist() == want, (
        f"lookup_draft({ids}, k={k}, max_ngram={max_ngram}) should be {want}, got {got.tolist()}"
    )


def repetitive_prompt(T: int, period: int, seed: int) -> torch.Tensor:
    """A prompt that repeats a random pattern: where prompt lookup shines."""
    gen = torch.Generator().manual_seed(seed)
    pattern = torch.randint(0, V, (period,), generator=gen)
    return pattern.repeat(T // period + 1)[None, :T]


@given(
    T=lengths(17),
    N=st.integers(1, 20),
    k=st.integers(1, 8),
    max_ngram=st.integers(1, 4),
    period=st.one_of(st.none(), st.integers(1, 6)),
    seed=seeds(),
)
def test_prompt_lookup_output_is_the_targets_greedy(impl, T, N, k, max_ngram, period, seed):
    target = tiny_model(0, **TARGET)
    if period is None:
        prompt = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(seed))
    else:
        prompt = repetitive_prompt(T, period, seed)
    want = greedy_generate_no_cache(target, prompt, N)
    got, stats = impl.prompt_lookup_decode(target, prompt, N, k=k, max_ngram=max_ngram)
    note(f"stats: {stats}")
    assert got.shape == want.shape and torch.equal(got, want), (
        f"prompt lookup must give exactly the target's greedy decoding:\n expected "
        f"{want.tolist()}\n got      {got.tolist()}\nUsually: the cache not cropped after a "
        "rejection, or the correction taken from the wrong row of logits"
    )
    assert stats.accepted + stats.target_calls == N and stats.accepted <= stats.proposed, (
        f"accepted + target_calls must be {N}, accepted <= proposed; got {stats}"
    )


@given(
    N=st.integers(1, 40),
    k=st.integers(1, 6),
    extra=st.integers(0, 3),
    max_ngram=st.integers(1, 3),
    seed=seeds(),
)
def test_prompt_lookup_cuts_target_calls_on_repetitive_text(impl, N, k, extra, max_ngram, seed):
    # A target whose greedy output keeps repeating the prompt's pattern of distinct tokens.
    period = k + extra
    pattern = torch.randperm(V, generator=torch.Generator().manual_seed(seed))[:period]
    T = 2 * period
    script = pattern.repeat((T + N) // period + 1)[: T + N].tolist()
    target = CountingModel(ScriptedModel(script, V))
    got, stats = impl.prompt_lookup_decode(target, torch.tensor([script[:T]]), N, k, max_ngram)
    assert got[0].tolist() == script, "the output must be the target's greedy decoding"
    want = math.ceil(N / (k + 1))
    assert stats.target_calls == want, (
        f"the text repeats a pattern of {period} tokens, so every lookup proposes the next "
        f"min(k, tokens left - 1) tokens correctly and {N} tokens need {want} target calls with "
        f"k = {k}; got {stats}"
    )
    want_calls, _ = ideal_schedule(T, rounds(T, N, k, lambda index: False))
    got_calls = [(c.tokens, c.cache_len) for c in target.calls]
    assert got_calls == want_calls, (
        f"target calls as (tokens fed, cache length before): expected {want_calls}, got "
        f"{got_calls}: feed the tokens the cache has not read plus the proposal, and crop the "
        "cache to the committed tokens minus the newest"
    )


def zeros(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.long)


BAD_CALLS = [
    BadCall("lookup_draft(ids of shape [1, 4], 2)", "ids not 1-D",
            lambda impl, t: impl.lookup_draft(zeros(1, 4), 2)),
    BadCall("lookup_draft(float ids [4], 2)", "float ids",
            lambda impl, t: impl.lookup_draft(torch.zeros(4), 2)),
    BadCall("lookup_draft(ids [4], 0)", "k of 0",
            lambda impl, t: impl.lookup_draft(zeros(4), 0)),
    BadCall("lookup_draft(ids [4], 2, max_ngram=0)", "max_ngram of 0",
            lambda impl, t: impl.lookup_draft(zeros(4), 2, 0)),
    BadCall("prompt_lookup_decode(target, prompt [2, 4], 3)", "a batch of 2",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(2, 4), 3)),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 0)", "max_new_tokens 0",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 0)),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 3, k=0)", "a decode k of 0",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 3, k=0)),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 3, max_ngram=0)",
            "a decode max_ngram of 0",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 3, max_ngram=0)),
]  # fmt: skip
NAMES = {
    "ids not 1-D": "ids",
    "float ids": "ids",
    "k of 0": "k",
    "max_ngram of 0": "max_ngram",
    "a batch of 2": "prompt_ids",
    "max_new_tokens 0": "max_new_tokens",
    "a decode k of 0": "k",
    "a decode max_ngram of 0": "max_ngram",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_lookup_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, tiny_model(0, **TARGET), match=NAMES[bad.why])
