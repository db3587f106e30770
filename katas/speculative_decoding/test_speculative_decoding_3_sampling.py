"""Level 3: `speculative_decode` with temperature > 0 samples exactly from the target."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from grading.errors import BadCall, assert_value_error
from grading.strategies import seeds
from katas.speculative_decoding.cases import MarkovModel, g_test, sequence_distribution

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
    g, critical, worst = g_test(samples, expected)
    assert g <= critical, (
        f"over {RUNS} runs (k = {k}, temperature = {temperature}, {N} new tokens, vocabulary of "
        f"{V}) the continuations do not follow the target's own sampling distribution, computed "
        f"exactly by enumeration (G = {g:.1f} > {critical:.1f} at significance 1e-4); worst "
        f"continuation {worst}. Usually: p or q not divided by the temperature, q taken from "
        "another row than the one the proposal was drawn from, or the acceptance rule of level 1"
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
