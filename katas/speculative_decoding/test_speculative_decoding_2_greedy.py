"""Level 2: greedy `speculative_decode` with two caches: exact output, calls, cost, rollback."""

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
    SMALL_DRAFT,
    TARGET,
    WIDE_DRAFT,
    FlopMeter,
    ScriptedModel,
    Z,
    coin_flips,
    ideal_schedule,
    replay_flops,
    rounds,
    tiny_model,
)

V = 64  # the shared model's vocabulary
DRAFTS = ["copy of the target", "small model", "wide model", "always wrong", "wrong every third"]
KS = st.one_of(st.sampled_from([1, 2, 3, 5, 7, 40]), st.integers(1, 12))
NEW_TOKENS = st.one_of(st.sampled_from([1, 2, 7, 11, 13]), st.integers(1, 24))


def make_prompt(T: int, seed: int) -> torch.Tensor:
    return torch.randint(0, V, (1, T), generator=torch.Generator().manual_seed(seed))


def make_draft(kind: str, target, script: list[int]):
    """A draft of each kind the tests use; the scripted ones know the target's greedy output."""
    if kind == "copy of the target":
        return target
    if kind == "small model":
        return tiny_model(5, **SMALL_DRAFT)
    if kind == "wide model":
        return tiny_model(6, **WIDE_DRAFT)
    if kind == "always wrong":
        return ScriptedModel(script, V, wrong=lambda index: True)
    return ScriptedModel(script, V, wrong=lambda index: index % 3 == 0)


def first_difference(got: torch.Tensor, want: torch.Tensor) -> int:
    bad = (got != want)[0].nonzero()
    return int(bad[0, 0]) if bad.numel() else -1


def check_stats(stats, N: int, k: int) -> None:
    __tracebackhide__ = True
    assert stats.accepted + stats.target_calls == N, (
        f"every target call adds exactly one token of its own after the accepted proposals, so "
        f"accepted + target_calls must be max_new_tokens = {N}; got {stats}"
    )
    assert 0 <= stats.accepted <= stats.proposed <= k * stats.target_calls, (
        f"0 <= accepted <= proposed <= k * target_calls must hold; got {stats} with k = {k}"
    )


@given(
    kind=st.sampled_from(DRAFTS),
    T=lengths(13),
    N=NEW_TOKENS,
    k=KS,
    prompt_seed=seeds(),
)
def test_greedy_output_is_the_targets_own_greedy_decoding(impl, kind, T, N, k, prompt_seed):
    target = tiny_model(0, **TARGET)
    prompt = make_prompt(T, prompt_seed)
    want = greedy_generate_no_cache(target, prompt, N)
    draft = make_draft(kind, target, want[0].tolist())
    got, stats = impl.speculative_decode(target, draft, prompt, N, k=k)
    note(f"stats: {stats}")
    assert got.dtype == torch.long and got.shape == want.shape, (
        f"expected int64 {list(want.shape)} (prompt + {N} new tokens), got {got.dtype} "
        f"{list(got.shape)}"
    )
    i = first_difference(got, want)
    assert i < 0, (
        f"with a draft that is a {kind}, k = {k}, prompt of {T} and {N} new tokens, the output "
        f"differs from the target's greedy decoding at index {i}:\n expected {want.tolist()}\n "
        f"got      {got.tolist()}\nUsually: a cache not cropped after a rejection (its stale "
        "keys change what the target sees), the correction taken from the wrong row of logits, "
        "or the newest token fed twice or never"
    )
    check_stats(stats, N, k)


@given(T=lengths(13), N=NEW_TOKENS, k=KS, prompt_seed=seeds())
def test_a_copy_of_the_target_is_always_accepted(impl, T, N, k, prompt_seed):
    target = tiny_model(0, **TARGET)
    _, stats = impl.speculative_decode(target, target, make_prompt(T, prompt_seed), N, k=k)
    want = math.ceil(N / (k + 1))
    assert stats.target_calls == want and stats.accepted == stats.proposed == N - want, (
        f"a draft identical to the target gets every proposal accepted, so each target call "
        f"makes k + 1 = {k + 1} tokens (fewer in the last round): {N} tokens need {want} target "
        f"calls, accepting all {N - want} proposals. Got {stats}. Usually: no bonus token after a "
        "fully accepted round, or a separate target call for the prompt"
    )
    assert stats.draft_calls == stats.proposed, (
        f"the draft is called once per proposal (k_round times a round); got {stats}"
    )


@given(T=lengths(13), N=NEW_TOKENS, k=KS, prompt_seed=seeds())
def test_an_always_wrong_draft_costs_one_target_call_per_token(impl, T, N, k, prompt_seed):
    target = tiny_model(0, **TARGET)
    prompt = make_prompt(T, prompt_seed)
    script = greedy_generate_no_cache(target, prompt, N)[0].tolist()
    draft = ScriptedModel(script, V, wrong=lambda index: True)
    got, stats = impl.speculative_decode(target, draft, prompt, N, k=k)
    proposed = sum(min(k, N - i - 1) for i in range(N))
    assert got[0].tolist() == script, "the output must still be the target's greedy decoding"
    assert (stats.target_calls, stats.accepted, stats.proposed) == (N, 0, proposed), (
        f"every proposal is wrong, so each round keeps none and adds the target's token: {N} "
        f"target calls, 0 accepted, {proposed} proposed (k_round = min(k, tokens left - 1)); "
        f"got {stats}"
    )


@given(
    T=lengths(11),
    N=NEW_TOKENS,
    k=KS,
    every=st.integers(2, 5),
    prompt_seed=seeds(),
)
def test_model_calls_follow_the_schedule(impl, T, N, k, every, prompt_seed):
    target = tiny_model(0, **TARGET)
    prompt = make_prompt(T, prompt_seed)
    script = greedy_generate_no_cache(target, prompt, N)[0].tolist()
    wrong = lambda index: index % every == 0
    inner = tiny_model(5, **SMALL_DRAFT)
    counting_target = CountingModel(target)
    counting_draft = CountingModel(ScriptedModel(script, V, wrong=wrong, inner=inner))
    impl.speculative_decode(counting_target, counting_draft, prompt, N, k=k)
    plan = rounds(T, N, k, wrong)
    want_target, want_draft = ideal_schedule(T, plan)
    note(f"rounds (n, k_round, accepted): {plan}")
    got_target = [(c.tokens, c.cache_len) for c in counting_target.calls]
    got_draft = [(c.tokens, c.cache_len) for c in counting_draft.calls]
    assert got_target == want_target, (
        f"target calls as (tokens fed, cache length before): expected {want_target}, got "
        f"{got_target}. Each round feeds the committed tokens the target has not read plus the "
        "proposals, at a cache cropped to the committed tokens minus the newest"
    )
    assert got_draft == want_draft, (
        f"draft calls as (tokens fed, cache length before): expected {want_draft}, got "
        f"{got_draft}. Usually: the draft's cache not cropped after a rejection, the last "
        "proposal fed to the draft (nobody needs what comes after it), or the prefix re-fed"
    )


COST_CASES = [  # (T, N, k, every): rejections at every `every`-th index
    (7, 30, 4, 3),
    (13, 23, 3, 5),
]


@pytest.mark.parametrize(("T", "N", "k", "every"), COST_CASES)
def test_flops_stay_within_the_ideal_cached_schedule(impl, figures, T, N, k, every):
    target = tiny_model(0, **TARGET)
    prompt = make_prompt(T, 99)
    script = greedy_generate_no_cache(target, prompt, N)[0].tolist()
    wrong = lambda index: index % every == 0
    inner = tiny_model(5, **SMALL_DRAFT)
    metered_target = FlopMeter(target)
    metered_draft = FlopMeter(ScriptedModel(script, V, wrong=wrong, inner=inner))
    impl.speculative_decode(metered_target, metered_draft, prompt, N, k=k)
    want_target, want_draft = ideal_schedule(T, rounds(T, N, k, wrong))
    budget = {"target": replay_flops(target, want_target), "draft": replay_flops(inner, want_draft)}
    spent = {"target": metered_target.flops, "draft": metered_draft.flops}
    for name in ("target", "draft"):
        figures.record(f"{name} FLOPs / ideal", spent[name] / budget[name], "x", T=T, N=N, k=k)
        assert spent[name] <= budget[name], (
            f"the {name} spent {spent[name]:,} FLOPs; the ideal cached schedule needs "
            f"{budget[name]:,} ({spent[name] / budget[name]:.2f}x). Every token goes through "
            "each model once per time it is proposed or verified: keep both caches across "
            "rounds and crop them after a rejection instead of re-feeding the prefix"
        )


@pytest.mark.parametrize(("alpha", "k"), [(0.5, 2), (0.8, 4), (0.9, 3)])
def test_tokens_per_target_call_match_the_formula(impl, figures, alpha, k):
    T, N = 5, 1200
    script = torch.randint(0, V, (T + N,), generator=torch.Generator().manual_seed(3)).tolist()
    target = ScriptedModel(script, V)
    draft = ScriptedModel(script, V, wrong=coin_flips(alpha, seed=int(100 * alpha) + k))
    prompt = torch.tensor([script[:T]])
    out, stats = impl.speculative_decode(target, draft, prompt, N, k=k)
    assert out[0].tolist() == script, "the output must be the scripted target's greedy decoding"
    # Tokens a round makes: 1 + min(G, k) with G geometric, P(G >= j) = alpha**j.
    mean = (1 - alpha ** (k + 1)) / (1 - alpha)
    second = sum((j + 1) ** 2 * alpha**j * (1 - alpha) for j in range(k)) + (k + 1) ** 2 * alpha**k
    sd = math.sqrt(second - mean**2)
    got = N / stats.target_calls
    R = stats.target_calls
    figures.record("tokens per target call", got, "", alpha=alpha, k=k, formula=round(mean, 3))
    assert abs(got - mean) <= Z * sd / math.sqrt(R) + k / R, (
        f"a draft that agrees with the target with probability {alpha} per token should make "
        f"(1 - a^(k+1)) / (1 - a) = {mean:.3f} tokens per target call with k = {k}; got "
        f"{got:.3f} over {R} calls ({stats}). Usually: rounds that stop early, or a round's "
        "proposals not all checked"
    )


# ----------------------------------------------------------------------------------------------
# bad input


def bad_input_models():
    return tiny_model(0, **TARGET), tiny_model(5, **SMALL_DRAFT)


BAD_CALLS = [
    BadCall(
        "speculative_decode(target, draft, prompt of shape [5], 3)",
        "no batch dimension",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(5, dtype=torch.long), 3),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt of shape [2, 5], 3)",
        "a batch of 2",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(2, 5, dtype=torch.long), 3),
    ),
    BadCall(
        "speculative_decode(target, draft, float prompt [1, 5], 3)",
        "a float prompt",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(1, 5), 3),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt of shape [1, 0], 3)",
        "an empty prompt",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(1, 0, dtype=torch.long), 3),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [1, 5], 0)",
        "max_new_tokens 0",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(1, 5, dtype=torch.long), 0),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [1, 200], 57) with max_seq_len 256",
        "past max_seq_len",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(1, 200, dtype=torch.long), 57),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [1, 5], 3, k=0)",
        "k of 0",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(1, 5, dtype=torch.long), 3, 0),
    ),
    BadCall(
        "speculative_decode(target, draft with vocab_size 32, prompt [1, 5], 3)",
        "mismatched vocabularies",
        lambda impl, t, d: impl.speculative_decode(
            t, tiny_model(5, vocab_size=32), torch.zeros(1, 5, dtype=torch.long), 3
        ),
    ),
]
NAMES = {
    "no batch dimension": "prompt_ids",
    "a batch of 2": "prompt_ids",
    "a float prompt": "prompt_ids",
    "an empty prompt": "prompt_ids",
    "max_new_tokens 0": "max_new_tokens",
    "past max_seq_len": "max_seq_len",
    "k of 0": "k",
    "mismatched vocabularies": "vocab_size",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_greedy_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, *bad_input_models(), match=NAMES[bad.why])


def test_draft_past_its_own_max_seq_len_raises_value_error(impl):
    target, _ = bad_input_models()
    short = tiny_model(5, max_seq_len=16)
    bad = BadCall(
        "speculative_decode(target, draft with max_seq_len 16, prompt [1, 10], 10)",
        "the draft's max_seq_len is passed",
        lambda impl: impl.speculative_decode(
            target, short, torch.zeros(1, 10, dtype=torch.long), 10
        ),
    )
    assert_value_error(bad, impl, match="max_seq_len")
