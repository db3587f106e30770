"""Level 4: prompt-lookup decoding, a draft made of the context itself."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.cost import CountingModel
from grading.errors import BadCall, assert_value_error
from grading.model import greedy_generate_no_cache
from grading.strategies import lengths, seeds
from katas.speculative_decoding.cases import (
    TARGET,
    ScriptedModel,
    expected_stats,
    ideal_schedule,
    lookup_oracle,
    lookup_rounds,
    rounds,
    schedule_difference,
    stats_as_dict,
    tiny_model,
)

V = 64


@pytest.mark.parametrize(
    ("ids", "k", "max_ngram", "want"),
    [
        ([1, 2, 3, 9, 1, 2, 3], 3, 3, [9, 1, 2]),  # the 3-gram [1, 2, 3] seen before
        ([1, 2, 3, 9, 1, 2, 3], 5, 3, [9, 1, 2, 3]),  # the context ends first
        ([4, 1, 7, 4, 1, 8, 4, 1], 2, 3, [8, 4]),  # [4, 1] twice before: the most recent wins
        ([6, 3, 9, 5, 3, 7, 6, 3], 2, 3, [9, 5]),  # [6, 3] beats the more recent [3] alone
        ([4, 4, 4], 2, 3, [4]),  # [4, 4] at 0 ends before the last token
        ([1, 2, 3, 4], 3, 3, []),  # nothing repeats
        ([7], 3, 3, []),  # one token: nothing earlier
        ([], 3, 3, []),  # no token at all: nothing to look up, and no error
        ([1, 2, 3, 9, 1, 2, 3], 2, 1, [9, 1]),  # max_ngram = 1: only the last token
    ],
)
def test_lookup_draft_known_cases(impl, ids, k, max_ngram, want):
    got = impl.lookup_draft(torch.tensor(ids, dtype=torch.long), k, max_ngram)
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


TOKEN_IDS = st.one_of(st.integers(0, 15), st.integers(16, 2**18 - 1))  # any id of 262,144


@given(
    alphabet=st.lists(TOKEN_IDS, min_size=2, max_size=6, unique=True),
    filler=st.lists(TOKEN_IDS, min_size=1, max_size=3, unique=True),
    head=st.lists(st.integers(0, 5), max_size=20),
    gap=st.one_of(st.integers(0, 4), st.integers(30, 150)),
    tail=st.lists(st.integers(0, 5), max_size=6),
    k=st.integers(1, 6),
    max_ngram=st.integers(1, 4),
)
@example(alphabet=[0, 1, 4], filler=[7], head=[2, 0], gap=1, tail=[0, 1], k=3, max_ngram=3)
def test_lookup_draft_on_long_contexts_of_any_token_ids(
    impl, alphabet, filler, head, gap, tail, k, max_ngram
):
    # A head and a tail over a few ids from anywhere in a vocabulary of 262,144 (so n-grams
    # repeat), with a gap of other ids between them: up to 176 tokens, the tail's n-grams
    # sometimes seen only at the very beginning.
    filler = [x for x in filler if x not in alphabet] or [max(alphabet) + 1]
    ids = (
        [alphabet[i % len(alphabet)] for i in head]
        + [filler[i % len(filler)] for i in range(gap)]
        + [alphabet[i % len(alphabet)] for i in tail]
    )
    want = lookup_oracle(ids, k, max_ngram)
    got = impl.lookup_draft(torch.tensor(ids, dtype=torch.long), k, max_ngram)
    assert got.tolist() == want, (
        f"lookup_draft(ids of {len(ids)} tokens, k={k}, max_ngram={max_ngram}) should be {want}, "
        f"got {got.tolist()}; ids = {ids}. Usually: n-grams compared through a sum or a code "
        "that two different n-grams can share, or only the most recent tokens searched"
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


def alphabet_prompt(T: int, size: int, seed: int) -> torch.Tensor:
    """A prompt of T tokens drawn from `size` distinct ones: n-grams repeat, continuations vary."""
    gen = torch.Generator().manual_seed(seed)
    alphabet = torch.randperm(V, generator=gen)[:size]
    return alphabet[torch.randint(0, size, (1, T), generator=gen)]


@given(
    T=st.one_of(lengths(17), st.integers(33, 90)),
    N=st.integers(1, 24),
    k=st.integers(1, 8),
    max_ngram=st.integers(1, 4),
    kind=st.sampled_from(["random", "few tokens", "repetitive"]),
    seed=seeds(),
)
def test_prompt_lookup_calls_and_stats_follow_the_lookups(impl, T, N, k, max_ngram, kind, seed):
    target = CountingModel(tiny_model(0, **TARGET))
    if kind == "random":
        prompt = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(seed))
    elif kind == "few tokens":
        prompt = alphabet_prompt(T, 3, seed)
    else:
        prompt = repetitive_prompt(T, 1 + seed % 7, seed)
    script = greedy_generate_no_cache(target, prompt, N)[0].tolist()
    target.calls.clear()
    got, stats = impl.prompt_lookup_decode(target, prompt, N, k=k, max_ngram=max_ngram)
    assert got[0].tolist() == script, "the output must be the target's greedy decoding"
    plan, _ = lookup_rounds(script, T, N, k, max_ngram)
    note(f"rounds (n, proposal length m, accepted): {plan}")
    want_calls, _ = ideal_schedule(T, plan)
    got_calls = [(c.tokens, c.cache_len) for c in target.calls]
    assert got_calls == want_calls, (
        f"target calls as (tokens fed, cache length before): expected {want_calls}, got "
        f"{got_calls}: {schedule_difference('target', want_calls, got_calls)}. Each round feeds "
        "the newest token and the proposal lookup_draft(committed, k_round, max_ngram) makes"
    )
    want = expected_stats(plan, draft_calls=0)
    assert stats_as_dict(stats) == want, (
        f"with rounds (n, proposal length m, accepted) {plan}, the stats must be {want} "
        f"(proposed sums the proposals' lengths m, not k_round); got {stats}"
    )


def zeros(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.long)


BAD_CALLS = [
    BadCall("lookup_draft(ids of shape [1, 4], 2)", "ids not 1-D",
            lambda impl, t: impl.lookup_draft(zeros(1, 4), 2)),
    BadCall("lookup_draft(float ids [4], 2)", "float ids",
            lambda impl, t: impl.lookup_draft(torch.zeros(4), 2)),
    BadCall("lookup_draft(ids [3, -1, 3], 2)", "a negative id",
            lambda impl, t: impl.lookup_draft(torch.tensor([3, -1, 3]), 2)),
    BadCall("lookup_draft(ids [4], 2.0)", "a float k",
            lambda impl, t: impl.lookup_draft(zeros(4), 2.0)),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 3.0)", "a float max_new_tokens",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 3.0)),
    BadCall("prompt_lookup_decode(target, prompt [[5, -2]], 3)", "a negative prompt id",
            lambda impl, t: impl.prompt_lookup_decode(t, torch.tensor([[5, -2]]), 3)),
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
    "a negative id": "ids",
    "a float k": "k",
    "a float max_new_tokens": "max_new_tokens",
    "a negative prompt id": "prompt_ids",
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
