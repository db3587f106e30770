"""Level 3: `speculative_decode` with temperature > 0 samples exactly from the target."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.cost import CountingModel
from grading.judge.errors import BadCall, assert_value_error, non_finite_calls
from grading.judge.strategies import lengths, seeds
from grading.model import greedy_generate_no_cache
from katas.speculative_decoding.cases import (
    MarkovModel,
    ScriptedModel,
    expected_stats,
    g_test,
    ideal_schedule,
    rounds,
    schedule_difference,
    sequence_distribution,
    stats_as_dict,
)

V, MAX_LEN = 4, 8  # four tokens: every continuation of 3 tokens can be enumerated (64 of them)
PROMPT = [0, 3, 1]
RUNS = 1500

# (k, temperature, logit scale, draft dtype): a k that fits the 3 new tokens in one round, one
# that does not; hot and cold temperatures, which every distribution must use (the draft's q as
# well as the target's p), down to 0.01 with logits that differ by less than that (their spread
# scaled with it), so the distributions are as far from one-hot as at temperature 1; a bfloat16
# draft for the float64 target.
SAMPLING_CASES = [
    (2, 1.0, 1.5, "float64"),
    (1, 0.6, 1.5, "float64"),
    (5, 1.7, 1.5, "float64"),
    (3, 0.01, 0.015, "bfloat16"),
]


def markov_pair(scale: float = 1.5, draft_dtype: str = "float64"):
    """A target and a draft that disagree a lot: fresh random tables each."""
    return (
        MarkovModel(V, MAX_LEN, seed=1, scale=scale),
        MarkovModel(V, MAX_LEN, seed=2, scale=scale, dtype=getattr(torch, draft_dtype)),
    )


@pytest.mark.parametrize(("k", "temperature", "scale", "draft_dtype"), SAMPLING_CASES)
def test_samples_follow_the_targets_own_distribution(impl, k, temperature, scale, draft_dtype):
    target, draft = markov_pair(scale, draft_dtype)
    N = 3
    expected = sequence_distribution(target, PROMPT, N, temperature)
    gen = torch.Generator().manual_seed(1000 + k)
    prompt = torch.tensor([PROMPT])
    samples = []
    for _ in range(RUNS):
        out, _ = impl.speculative_decode(
            target, draft, prompt, N, k=k, temperature=temperature, generator=gen
        )
        samples.append(tuple(out[0, len(PROMPT) :].tolist()))
    passed, verdict = g_test(samples, expected)
    assert passed, (
        f"over {RUNS} runs (k = {k}, temperature = {temperature}, a {draft_dtype} draft, {N} new "
        f"tokens, vocabulary of {V}) the continuations do not follow the target's own sampling "
        f"distribution, computed exactly by enumeration: {verdict}. Usually: p or q not divided "
        "by the temperature, a small temperature treated as 0 (greedy), q taken from another "
        "row than the one the proposal was drawn from, or the acceptance rule of level 1"
    )


@given(k=st.integers(1, 6), N=st.integers(1, 5), seed=seeds())
def test_a_copy_of_the_target_is_always_accepted_when_sampling(impl, k, N, seed):
    target, _ = markov_pair()
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.tensor([PROMPT])
    _, stats = impl.speculative_decode(
        target, target, prompt, N, k=k, temperature=1.0, generator=gen
    )
    want = math.ceil(N / (k + 1))
    assert stats.target_calls == want and stats.accepted == stats.proposed, (
        f"with the target as its own draft, p == q at every position, so min(1, p/q) = 1 and "
        f"every proposal is accepted: {N} tokens need {want} target calls with k = {k}; got "
        f"{stats}"
    )


def test_the_generator_makes_sampling_reproducible(impl):
    target, draft = markov_pair()
    prompt = torch.tensor([PROMPT])
    runs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)  # must not matter
        gen = torch.Generator().manual_seed(5)
        runs.append(
            [
                impl.speculative_decode(
                    target, draft, prompt, 4, k=2, temperature=1.0, generator=gen
                )[0].tolist()
                for _ in range(20)
            ]
        )
    assert runs[0] == runs[1], (
        "two runs with generators seeded alike gave different tokens: draw every random number "
        "(the draft's proposals and accept_reject's) with generator=generator"
    )


def test_without_a_generator_sampling_follows_the_global_one(impl):
    target, draft = markov_pair()
    prompt = torch.tensor([PROMPT])
    runs = {}
    with torch.random.fork_rng():
        for global_seed in (1, 1, 2, 3):
            torch.manual_seed(global_seed)
            runs.setdefault(global_seed, []).append(
                [
                    impl.speculative_decode(target, draft, prompt, 4, k=2, temperature=1.0)[0]
                    .flatten()
                    .tolist()
                    for _ in range(10)
                ]
            )
    assert runs[1][0] == runs[1][1], (
        "with generator=None the random numbers come from torch's global generator, so two runs "
        "after torch.manual_seed(1) must give the same tokens; they differed. Usually: a "
        "generator made inside the call with a seed of its own (from the clock or the OS)"
    )
    assert runs[1][0] != runs[2][0] or runs[1][0] != runs[3][0], (
        "with generator=None the random numbers come from torch's global generator, so ten "
        "continuations sampled after torch.manual_seed(1), (2) and (3) must differ (no "
        "continuation of 4 tokens here has probability near 1); they were identical. Usually: a "
        "generator made inside the call with a fixed seed, such as "
        "torch.Generator().manual_seed(0)"
    )


def test_without_a_generator_samples_follow_the_targets_distribution(impl):
    # generator=None: the draft's proposals and accept_reject's draws all come from torch's
    # global generator, which moves on after each draw; runs one after another, after one
    # torch.manual_seed, then sample exactly the target's distribution.
    target, draft = markov_pair()
    N, k, runs = 3, 1, 1000
    expected = sequence_distribution(target, PROMPT, N, 1.0)
    prompt = torch.tensor([PROMPT])
    with torch.random.fork_rng():
        torch.manual_seed(77)
        samples = []
        for _ in range(runs):
            out, _ = impl.speculative_decode(target, draft, prompt, N, k=k, temperature=1.0)
            samples.append(tuple(out[0, len(PROMPT) :].tolist()))
    passed, verdict = g_test(samples, expected)
    assert passed, (
        f"over {runs} runs without a generator (k = {k}, temperature 1, {N} new tokens), the "
        f"continuations do not follow the target's own sampling distribution: {verdict}. With "
        "generator=None the proposals (drawn from q) and accept_reject's uniforms and samples "
        "all come from torch's global generator. Usually: a generator of the call's own with a "
        "fixed seed (or the global seed) for some of the draws, so that every run repeats them"
    )


SMALL_TEMPERATURES = st.one_of(
    st.sampled_from([1e-8, 1e-6, 1e-4, 1e-3, 0.01, 0.049]), st.floats(1e-8, 0.1)
)


@given(
    temperature=SMALL_TEMPERATURES,
    k=st.integers(1, 5),
    draft_dtype=st.sampled_from(["float64", "float32", "bfloat16"]),
    seed=seeds(),
)
@example(temperature=1e-6, k=2, draft_dtype="float64", seed=0)
@example(temperature=0.04, k=3, draft_dtype="bfloat16", seed=1)
def test_a_small_temperature_still_samples(impl, temperature, k, draft_dtype, seed):
    # Logits that differ by about temperature / 4: softmax(logits / temperature) is close to
    # uniform over the 4 tokens, however small the temperature, so 24 sampled tokens are the
    # greedy decoding with probability below 1e-8.
    target = MarkovModel(V, 32, seed=1, scale=temperature / 4)
    draft = MarkovModel(V, 32, seed=2, scale=temperature / 4, dtype=getattr(torch, draft_dtype))
    prompt, N = torch.tensor([PROMPT]), 24
    greedy = greedy_generate_no_cache(target, prompt, N)
    gen = torch.Generator().manual_seed(seed)
    got, _ = impl.speculative_decode(
        target, draft, prompt, N, k=k, temperature=temperature, generator=gen
    )
    assert not torch.equal(got, greedy), (
        f"at temperature {temperature:g}, with logits that differ by about {temperature / 4:g}, "
        f"p = softmax(logits / temperature) is nearly uniform over {V} tokens, yet the {N} "
        f"sampled tokens are exactly the greedy decoding {greedy[0, 3:].tolist()} (chance: "
        "below 1e-8). Any temperature > 0 samples; only 0 is greedy. Usually: a small "
        "temperature rounded to 0 (greedy) to avoid dividing by it"
    )


def rounds_from_calls(calls, T: int, N: int) -> list[tuple[int, int, int]]:
    """The rounds (n, k_round, accepted) the target's calls show: round r feeds the tokens from
    its cache length on, so n is T in the first round and cache length + 1 after; the next
    round's n tells how many tokens this one committed."""
    starts = [T if c.cache_len == 0 else c.cache_len + 1 for c in calls]
    sizes = [c.tokens - (n - (c.cache_len or 0)) for c, n in zip(calls, starts, strict=True)]
    ends = [*starts[1:], T + N]
    return [(n, m, end - n - 1) for n, m, end in zip(starts, sizes, ends, strict=True)]


@given(
    T=lengths(9),
    N=st.integers(1, 20),
    k=st.integers(1, 7),
    temperature=st.floats(0.05, 5.0),
    draft_dtype=st.sampled_from(["float64", "float32", "bfloat16"]),
    seed=seeds(),
)
def test_sampling_stats_count_the_rounds_taken(impl, T, N, k, temperature, draft_dtype, seed):
    # Distributions far from one-hot: which proposals are kept is up to accept_reject's coins.
    # The target's calls show the rounds; the stats and the draft's calls must match them.
    target = CountingModel(MarkovModel(V, 32, seed=1))
    draft = CountingModel(MarkovModel(V, 32, seed=2, dtype=getattr(torch, draft_dtype)))
    prompt = torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(seed))
    gen = torch.Generator().manual_seed(seed)
    out, stats = impl.speculative_decode(
        target, draft, prompt, N, k=k, temperature=temperature, generator=gen
    )
    assert out.shape == (1, T + N) and torch.equal(out[:, :T], prompt), (
        f"expected the prompt followed by {N} new tokens, got {out.tolist()}"
    )
    plan = rounds_from_calls(target.calls, T, N)
    note(f"rounds (n, k_round, accepted) from the target's calls: {plan}")
    want_rounds = [(n, min(k, T + N - n - 1)) for n, _, _ in plan]
    assert [(n, m) for n, m, _ in plan] == want_rounds and all(0 <= j <= m for _, m, j in plan), (
        f"the target's calls show rounds (n, proposals fed, tokens kept before the next round "
        f"minus one) {plan}; each round must feed k_round = min(k, T + N - n - 1) proposals "
        f"(k = {k}, T + N = {T + N}) and keep at most that many: expected (n, k_round) "
        f"{want_rounds}"
    )
    _, want_draft = ideal_schedule(T, plan)
    got_draft = [(c.tokens, c.cache_len) for c in draft.calls]
    assert got_draft == want_draft, (
        f"a {draft_dtype} draft at temperature {temperature:g}, with the rounds {plan}: its "
        f"calls as (tokens fed, cache length before) should be {want_draft}, got {got_draft}: "
        f"{schedule_difference('draft', want_draft, got_draft)}"
    )
    want = expected_stats(plan, draft_calls=len(want_draft))
    assert stats_as_dict(stats) == want, (
        f"at temperature {temperature:g} with the rounds (n, k_round, accepted) {plan} the "
        f"target's calls show, the stats must be {want} (accepted counts the proposals "
        f"accept_reject kept, so accepted + target_calls = {N}; proposed and draft_calls sum "
        f"k_round); got {stats}"
    )


SCRIPT_V = 64  # the scripted models' vocabulary


@given(
    T=lengths(9),
    N=st.integers(1, 24),
    k=st.integers(1, 7),
    every=st.one_of(st.none(), st.integers(1, 5)),
    temperature=st.floats(0.1, 10.0),
    seed=st.integers(0, 2**16),
)
def test_sampling_calls_and_stats_follow_the_schedule(impl, T, N, k, every, temperature, seed):
    # Logits with a margin of 1e4 make p and q one-hot at any temperature here: the target
    # accepts exactly the proposals that match its script, so the rounds are known in advance.
    script = torch.randint(0, SCRIPT_V, (T + N,), generator=torch.Generator().manual_seed(seed))
    script = script.tolist()
    wrong = (lambda index: False) if every is None else (lambda index: index % every == 0)
    target = CountingModel(ScriptedModel(script, SCRIPT_V, margin=1e4))
    draft = CountingModel(ScriptedModel(script, SCRIPT_V, wrong=wrong, margin=1e4))
    gen = torch.Generator().manual_seed(seed)
    out, stats = impl.speculative_decode(
        target, draft, torch.tensor([script[:T]]), N, k=k, temperature=temperature, generator=gen
    )
    assert out[0].tolist() == script, (
        f"p is one-hot on the script here, so sampling must give it: expected {script}, got "
        f"{out[0].tolist()}"
    )
    plan = rounds(T, N, k, wrong)
    want_target, want_draft = ideal_schedule(T, plan)
    got_target = [(c.tokens, c.cache_len) for c in target.calls]
    got_draft = [(c.tokens, c.cache_len) for c in draft.calls]
    note(f"rounds (n, k_round, accepted): {plan}")
    for name, want, got in (("target", want_target, got_target), ("draft", want_draft, got_draft)):
        assert got == want, (
            f"at temperature {temperature}, {name} calls as (tokens fed, cache length before): "
            f"expected {want}, got {got}: {schedule_difference(name, want, got)}. Sampling "
            "follows level 2's schedule: the same calls, the same rollback"
        )
    want_stats = expected_stats(plan, draft_calls=len(want_draft))
    assert stats_as_dict(stats) == want_stats, (
        f"at temperature {temperature} with rounds (n, k_round, accepted) {plan}, the stats "
        f"must count them as at temperature 0: expected {want_stats}, got {stats}"
    )


BAD_CALLS = [
    BadCall(
        "speculative_decode(target, draft, prompt [1, 3], 3, temperature=-0.5)",
        "a negative temperature",
        lambda impl: impl.speculative_decode(
            *markov_pair(), torch.tensor([PROMPT]), 3, temperature=-0.5
        ),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [1, 3], 1, temperature=-0.5)",
        "a negative temperature, one new token",
        lambda impl: impl.speculative_decode(
            *markov_pair(), torch.tensor([PROMPT]), 1, temperature=-0.5
        ),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [1, 3], 3, temperature=-1e-300)",
        "a tiny negative temperature",
        lambda impl: impl.speculative_decode(
            *markov_pair(), torch.tensor([PROMPT]), 3, temperature=-1e-300
        ),
    ),
    *non_finite_calls(
        "speculative_decode(target, draft, prompt [1, 3], 3, temperature={})",
        "temperature",
        lambda value, impl: impl.speculative_decode(
            *markov_pair(), torch.tensor([PROMPT]), 3, temperature=value
        ),
    ),
]


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_sampling_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match="temperature")
