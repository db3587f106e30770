"""Level 4: prompt-lookup decoding, a draft made of the context itself."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.cost import CountingModel
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import lengths, seeds
from grading.model import greedy_generate_no_cache
from katas.speculative_decoding.cases import (
    TARGET,
    ScriptedModel,
    expected_stats,
    ideal_schedule,
    logs_checked,
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


def distinct_ids(count: int, high: int, gen: torch.Generator) -> list[int]:
    """`count` different token ids drawn from 0 .. high - 1."""
    ids: list[int] = []
    while len(ids) < count:
        fresh = torch.randint(0, high, (2 * count,), generator=gen).tolist()
        ids = list(dict.fromkeys(ids + fresh))[:count]
    return ids


# How far back the tail's only earlier occurrence lies: often more than a window of 32, 128 or
# 256 recent tokens would hold.
FAR = st.one_of(
    st.sampled_from([31, 32, 127, 128, 129, 255, 256, 257, 1000, 2047]), st.integers(0, 2100)
)


@given(
    n=st.integers(1, 4),
    longer=st.integers(0, 2),
    repeats=st.integers(1, 3),
    follow=st.integers(1, 6),
    lead=st.integers(0, 40),
    gap=FAR,
    decoy=st.booleans(),
    high=st.sampled_from([2**12, 2**18, 2**40, 2**63 - 1]),
    k=st.integers(1, 8),
    seed=seeds(),
)
@example(n=3, longer=0, repeats=1, follow=4, lead=0, gap=200, decoy=True, high=2**12, k=4, seed=0)
def test_lookup_draft_finds_a_match_however_far_back(
    impl, n, longer, repeats, follow, lead, gap, decoy, high, k, seed
):
    # ids = lead, then `repeats` times (the n-gram X, `follow` tokens, a few others), `gap`
    # other tokens, maybe a decoy (a shorter tail of X and one more token), and X again at the
    # end: every token outside X is seen once, so X's last occurrence before the end (up to
    # 2,100 tokens back) is the longest, most recent match, and it beats the decoy.
    gen = torch.Generator().manual_seed(seed)
    spacers = [int(torch.randint(0, 5, (), generator=gen)) for _ in range(repeats - 1)]
    j = int(torch.randint(1, n, (), generator=gen)) if decoy and n > 1 else 0
    fresh = iter(distinct_ids(n + lead + repeats * follow + sum(spacers) + gap + 1, high, gen))
    X = [next(fresh) for _ in range(n)]
    ids = [next(fresh) for _ in range(lead)]
    for r in range(repeats):
        start = len(ids)  # where X's most recent earlier occurrence begins
        ids += X + [next(fresh) for _ in range(follow)]
        ids += [next(fresh) for _ in range(spacers[r] if r < repeats - 1 else gap)]
    if j:
        ids += X[-j:] + [next(fresh)]
    ids += X
    max_ngram = n + longer
    want = lookup_oracle(ids, k, max_ngram)
    got = impl.lookup_draft(torch.tensor(ids, dtype=torch.long), k, max_ngram)
    assert got.tolist() == want, (
        f"lookup_draft(ids of {len(ids)} tokens, k={k}, max_ngram={max_ngram}) should be {want}: "
        f"the context's last {n} tokens {X} occur earlier last at index {start}, "
        f"{len(ids) - start} tokens from the end"
        + (f", and its last {j} once more recently" if j else "")
        + f"; got {got.tolist()}. The whole context is searched, however long, and the longest "
        "tail that occurs wins over a shorter, more recent one. Usually: only a window of the "
        "most recent tokens searched"
    )


def test_lookup_draft_searches_a_context_of_twenty_thousand_tokens(impl):
    """The context's last 3 tokens occur once before, at its very start, 20,000 tokens back:
    a window of recent tokens of any size short of the whole context misses them."""
    ids = [7, 8, 9, 42, *range(100, 20100), 7, 8, 9]
    got = impl.lookup_draft(torch.tensor(ids, dtype=torch.long), 4, 3)
    assert got.tolist() == [42, 100, 101, 102], (
        f"lookup_draft(ids of {len(ids)} tokens, k=4, max_ngram=3) should be [42, 100, 101, "
        f"102]: the last 3 tokens [7, 8, 9] occur earlier only at index 0; got {got.tolist()}. "
        "The whole context is searched, however long"
    )


# Bases where float32 (from 2**24) or float64 (from 2**53) holds only every other integer, or
# fewer: ids base + 0 .. base + 3 that differ can round to one float.
BASES = st.one_of(
    st.sampled_from([2**24, 2**24 + 1, 2**31 - 2, 2**53, 2**53 + 1, 2**62, 2**63 - 4]),
    st.integers(2**24, 2**63 - 4),
)


@given(
    base=BASES,
    offsets=st.lists(st.integers(0, 3), min_size=1, max_size=60),
    k=st.integers(1, 6),
    max_ngram=st.integers(1, 4),
)
@example(base=2**24, offsets=[0, 1, 2, 0, 1], k=2, max_ngram=2)
def test_lookup_draft_tells_apart_ids_that_round_to_one_float(impl, base, offsets, k, max_ngram):
    # ids any int64 >= 0: four neighbouring large ids, so near-misses (n-grams that differ in the
    # lowest bits of one id) are everywhere.
    ids = [base + offset for offset in offsets]
    want = lookup_oracle(ids, k, max_ngram)
    got = impl.lookup_draft(torch.tensor(ids, dtype=torch.long), k, max_ngram)
    assert got.tolist() == want, (
        f"lookup_draft({ids}, k={k}, max_ngram={max_ngram}) should be {want}, got "
        f"{got.tolist()}. Token ids are int64 and compared exactly: converted to float32 (or "
        "float64 past 2**53), ids that differ by a few round to the same float and n-grams "
        'that differ "match"'
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
    with logs_checked(target):
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


# The same errors on the paths where nothing gets looked up: a context of one token or none
# (nothing to search), and a decoding of one token (k_round is 0, so no lookup at all). A bad
# argument is bad input whether or not this call would have used it.
EDGE_CALLS = [
    BadCall("lookup_draft(ids [5], 2, max_ngram=0)", "max_ngram of 0, one-token ids",
            lambda impl, t: impl.lookup_draft(torch.tensor([5]), 2, 0), names="max_ngram"),
    BadCall("lookup_draft(ids [], 2, max_ngram=0)", "max_ngram of 0, empty ids",
            lambda impl, t: impl.lookup_draft(zeros(0), 2, 0), names="max_ngram"),
    BadCall("lookup_draft(ids [5], 2, max_ngram=2.0)", "a float max_ngram, one-token ids",
            lambda impl, t: impl.lookup_draft(torch.tensor([5]), 2, 2.0), names="max_ngram"),
    BadCall("lookup_draft(ids [5], 0)", "k of 0, one-token ids",
            lambda impl, t: impl.lookup_draft(torch.tensor([5]), 0), names="k"),
    BadCall("lookup_draft(ids [], True)", "a bool k, empty ids",
            lambda impl, t: impl.lookup_draft(zeros(0), True), names="k"),
    BadCall("lookup_draft(ids [-1], 2)", "a lone negative id",
            lambda impl, t: impl.lookup_draft(torch.tensor([-1]), 2), names="ids"),
    BadCall("lookup_draft(ids [-2**63], 2)", "the most negative id",
            lambda impl, t: impl.lookup_draft(torch.tensor([-(2**63)]), 2), names="ids"),
    BadCall("lookup_draft(ids [7, -3], 2)", "a negative id in a context with no repeat",
            lambda impl, t: impl.lookup_draft(torch.tensor([7, -3]), 2), names="ids"),
    BadCall("lookup_draft(float ids [], 2)", "empty float ids",
            lambda impl, t: impl.lookup_draft(torch.zeros(0), 2), names="ids"),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 1, max_ngram=0)",
            "max_ngram of 0, one new token",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 1, max_ngram=0),
            names="max_ngram"),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 1, max_ngram=1.0)",
            "a float max_ngram, one new token",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 1, max_ngram=1.0),
            names="max_ngram"),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 1, k=2.0)", "a float k, one new token",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 1, k=2.0), names="k"),
    BadCall("prompt_lookup_decode(target, prompt [1, 4], 1, k=0)", "k of 0, one new token",
            lambda impl, t: impl.prompt_lookup_decode(t, zeros(1, 4), 1, k=0), names="k"),
    BadCall("prompt_lookup_decode(target, prompt [[5]], 3, max_ngram=0)",
            "max_ngram of 0, one-token prompt",
            lambda impl, t: impl.prompt_lookup_decode(t, torch.tensor([[5]]), 3, max_ngram=0),
            names="max_ngram"),
    BadCall("prompt_lookup_decode(target, prompt [[-1]], 1)", "a lone negative prompt id",
            lambda impl, t: impl.prompt_lookup_decode(t, torch.tensor([[-1]]), 1),
            names="prompt_ids"),
]  # fmt: skip


@pytest.mark.parametrize("bad", EDGE_CALLS, ids=str)
def test_lookup_bad_input_on_edge_paths_raises_value_error(impl, bad):
    assert_value_error(bad, impl, tiny_model(0, **TARGET))
