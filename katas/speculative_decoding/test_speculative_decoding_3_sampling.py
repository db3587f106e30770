"""Level 3: `speculative_decode` with temperature > 0 samples exactly from the target."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.cost import CountingModel
from grading.errors import BadCall, assert_value_error
from grading.strategies import lengths, seeds
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

# (k, temperature): a k that fits the 3 new tokens in one round, one that does not; a hot and a
# cold temperature, which every distribution must use (the draft's q as well as the target's p).
SAMPLING_CASES = [(2, 1.0), (1, 0.6), (5, 1.7)]


def markov_pair():
    """A target and a draft that disagree a lot: fresh random tables each."""
    return MarkovModel(V, MAX_LEN, seed=1), MarkovModel(V, MAX_LEN, seed=2)


@pytest.mark.parametrize(("k", "temperature"), SAMPLING_CASES)
def test_samples_follow_the_targets_own_distribution(impl, k, temperature):
    target, draft = markov_pair()
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
        f"over {RUNS} runs (k = {k}, temperature = {temperature}, {N} new tokens, vocabulary of "
        f"{V}) the continuations do not follow the target's own sampling distribution, computed "
        f"exactly by enumeration: {verdict}. Usually: p or q not divided by the temperature, q "
        "taken from another row than the one the proposal was drawn from, or the acceptance rule "
        "of level 1"
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
]


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_sampling_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match="temperature")
