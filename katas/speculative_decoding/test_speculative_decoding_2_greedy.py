"""Level 2: greedy `speculative_decode` with two caches: exact output, calls, cost, rollback."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.judge.cost import CountingModel
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.judge.strategies import lengths, seeds
from grading.model import greedy_generate_no_cache, load_weights_in_place, make_model
from katas.speculative_decoding.cases import (
    SMALL_DRAFT,
    TARGET,
    WIDE_DRAFT,
    FlopMeter,
    ScriptedModel,
    Z,
    coin_flips,
    expected_stats,
    ideal_schedule,
    logs_checked,
    replay_flops,
    rounds,
    schedule_difference,
    stats_as_dict,
    tiny_model,
    twin,
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
    target = CountingModel(tiny_model(0, **TARGET))
    draft = CountingModel(twin(0, **TARGET))  # the same weights, its own call log
    with logs_checked(target, draft):
        _, stats = impl.speculative_decode(target, draft, make_prompt(T, prompt_seed), N, k=k)
    plan = rounds(T, N, k, lambda index: False)
    want_target, want_draft = ideal_schedule(T, plan)
    got_target = [(c.tokens, c.cache_len) for c in target.calls]
    got_draft = [(c.tokens, c.cache_len) for c in draft.calls]
    note(f"rounds (n, k_round, accepted): {plan}")
    sizes = [k_round for _, k_round, _ in plan]
    first = (
        schedule_difference("target", want_target, got_target)
        if got_target != want_target
        else schedule_difference("draft", want_draft, got_draft)
    )
    assert got_target == want_target and got_draft == want_draft, (
        f"a draft identical to the target gets every proposal accepted, so with k = {k}, a "
        f"prompt of {T} and {N} new tokens the rounds propose {sizes} tokens (k_round = min(k, "
        f"T + N - n - 1)) and each makes k_round + 1. Calls as (tokens fed, cache length "
        f"before):\n target expected {want_target}\n target got      {got_target}\n draft "
        f"expected  {want_draft}\n draft got       {got_draft}\n{first}"
    )
    want = expected_stats(plan, draft_calls=len(want_draft))
    assert stats_as_dict(stats) == want, (
        f"the calls follow the schedule, but the stats do not count them: expected {want}, got "
        f"{stats}"
    )


@given(
    dtype=st.sampled_from([torch.float32, torch.bfloat16]),
    T=lengths(13),
    N=NEW_TOKENS,
    k=KS,
    prompt_seed=seeds(),
)
def test_a_draft_in_another_dtype(impl, dtype, T, N, k, prompt_seed):
    target = tiny_model(0, **TARGET)
    draft = tiny_model(5, dtype, **SMALL_DRAFT)
    prompt = make_prompt(T, prompt_seed)
    want = greedy_generate_no_cache(target, prompt, N)
    got, stats = impl.speculative_decode(target, draft, prompt, N, k=k)
    assert torch.equal(got, want), (
        f"a {dtype} draft for a float64 target (the README lets the two differ in everything "
        f"but vocab_size) must still give the target's greedy decoding:\n expected "
        f"{want.tolist()}\n got      {got.tolist()}\nUsually: both caches made in the target's "
        "dtype; make each in the dtype of its own model's parameters"
    )
    check_stats(stats, N, k)


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


def test_speculative_decode_follows_weights_changed_in_place_between_calls(impl):
    """The models' weights may change in place between two calls (a checkpoint loaded into
    them): each call decodes with the weights it finds; nothing derived from them is kept."""
    target = make_model(0, torch.float64, **TARGET)
    draft = make_model(5, torch.float64, **SMALL_DRAFT)
    prompt = make_prompt(6, 1)
    impl.speculative_decode(target, draft, prompt, 8, k=3)
    caller_changes(impl.speculative_decode, target, draft)
    load_weights_in_place(target, seed=2)
    load_weights_in_place(draft, seed=3)
    expected = greedy_generate_no_cache(target, prompt, 8)
    got, _ = impl.speculative_decode(target, draft, prompt, 8, k=3)
    assert torch.equal(got, expected), (
        f"after the models' weights changed in place since the last call: expected the target's "
        f"greedy decoding {expected.tolist()}, got {got.tolist()}. Decode with the weights the "
        "models have now; keep nothing from an earlier call"
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
    with logs_checked(counting_target, counting_draft):
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


@given(
    T=lengths(9),
    N=NEW_TOKENS,
    k=KS,
    room=st.sampled_from([0, 1, 4096, 2**16]),
    decode=st.sampled_from(["speculative_decode", "prompt_lookup_decode"]),
    seed=seeds(),
)
def test_caches_hold_room_for_this_decoding_only(impl, T, N, k, room, decode, seed):
    # Models whose config.max_seq_len leaves `room` tokens past T + N (up to 65,536), each
    # weighing the cache it is handed at every call: one layer, one kv head, head_dim 2, so a
    # cache of S tokens holds keys and values of 2 x 2 x S elements.
    script = torch.randint(0, V, (T + N,), generator=torch.Generator().manual_seed(seed)).tolist()
    limit = T + N + room
    target = ScriptedModel(script, V, max_seq_len=limit, weigh_cache=True)
    draft = ScriptedModel(
        script, V, wrong=lambda index: index % 3 == 0, dtype=torch.float32, max_seq_len=limit,
        weigh_cache=True,
    )  # fmt: skip
    prompt = torch.tensor([script[:T]])
    if decode == "speculative_decode":
        out, _ = impl.speculative_decode(target, draft, prompt, N, k=k)
        models = {"target": target, "draft": draft}
    else:
        out, _ = impl.prompt_lookup_decode(target, prompt, N, k=k)
        models = {"target": target}
    assert out[0].tolist() == script, "the output must be the scripted target's greedy decoding"
    for name, model in models.items():  # (the draft is never called when N = 1)
        per_token = 2 * 2 * model.weight.dtype.itemsize  # keys and values, head_dim 2
        want, held = per_token * (T + N), max(model.cache_bytes, default=0)
        assert held <= want, (
            f"{decode} with T = {T}, max_new_tokens = {N}: the {name}'s cache holds {held} "
            f"bytes, room for {held / per_token:g} tokens ({model.weight.dtype}, "
            f"{per_token} bytes a token); it needs room for T + max_new_tokens = {T + N} "
            f"tokens, {want} bytes, whatever the model's config.max_seq_len (here {limit}). "
            "Usually: the cache made with max_seq_len=model.config.max_seq_len"
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


def zeros(*shape: int) -> torch.Tensor:
    return torch.zeros(*shape, dtype=torch.long)


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
        "speculative_decode(target, draft, prompt [1, 5], 3.0)",
        "a float max_new_tokens",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.zeros(1, 5, dtype=torch.long), 3.0),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [1, 5], 3, k=2.0)",
        "a float k",
        lambda impl, t, d: impl.speculative_decode(
            t, d, torch.zeros(1, 5, dtype=torch.long), 3, k=2.0
        ),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [1, 5], 3, k=True)",
        "a bool k",
        lambda impl, t, d: impl.speculative_decode(
            t, d, torch.zeros(1, 5, dtype=torch.long), 3, k=True
        ),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [[1, -1, 2]], 3)",
        "a negative token id",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.tensor([[1, -1, 2]]), 3),
    ),
    BadCall(
        "speculative_decode(target, draft, prompt [[1, 64, 2]], 3) with vocab_size 64",
        "a token id past the vocabulary",
        lambda impl, t, d: impl.speculative_decode(t, d, torch.tensor([[1, 64, 2]]), 3),
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
    "a float max_new_tokens": "max_new_tokens",
    "a float k": "k",
    "a bool k": "k",
    "a negative token id": "prompt_ids",
    "a token id past the vocabulary": "prompt_ids",
    "past max_seq_len": "max_seq_len",
    "k of 0": "k",
    "mismatched vocabularies": "vocab_size",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_greedy_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, *bad_input_models(), match=NAMES[bad.why])


# The same errors when the decoding is a single round that proposes nothing (max_new_tokens = 1,
# so k_round is 0 and the draft is never called), or the prompt is one token: a bad argument is
# bad input whether or not this call would have used it.
EDGE_CALLS = [
    BadCall("speculative_decode(target, draft, prompt [1, 5], 1, k=0)", "k of 0, one new token",
            lambda impl, t, d: impl.speculative_decode(t, d, zeros(1, 5), 1, k=0), names="k"),
    BadCall("speculative_decode(target, draft, prompt [1, 5], 1, k=2.0)",
            "a float k, one new token",
            lambda impl, t, d: impl.speculative_decode(t, d, zeros(1, 5), 1, k=2.0), names="k"),
    BadCall("speculative_decode(target, draft, prompt [1, 5], 1, k=True)",
            "a bool k, one new token",
            lambda impl, t, d: impl.speculative_decode(t, d, zeros(1, 5), 1, k=True), names="k"),
    BadCall("speculative_decode(target, draft with vocab_size 32, prompt [1, 5], 1)",
            "mismatched vocabularies, one new token",
            lambda impl, t, d: impl.speculative_decode(
                t, tiny_model(5, vocab_size=32), zeros(1, 5), 1),
            names="vocab_size"),
    BadCall("speculative_decode(target, draft, prompt [[7]], 3, k=0)", "k of 0, one-token prompt",
            lambda impl, t, d: impl.speculative_decode(t, d, torch.tensor([[7]]), 3, k=0),
            names="k"),
    BadCall("speculative_decode(target, draft, prompt [[-1]], 1)", "a lone negative prompt id",
            lambda impl, t, d: impl.speculative_decode(t, d, torch.tensor([[-1]]), 1),
            names="prompt_ids"),
    BadCall("speculative_decode(target, draft, prompt [[64]], 1) with vocab_size 64",
            "a lone prompt id past the vocabulary",
            lambda impl, t, d: impl.speculative_decode(t, d, torch.tensor([[64]]), 1),
            names="prompt_ids"),
]  # fmt: skip


@pytest.mark.parametrize("bad", EDGE_CALLS, ids=str)
def test_greedy_bad_input_on_edge_paths_raises_value_error(impl, bad):
    assert_value_error(bad, impl, *bad_input_models())


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


@given(
    T=lengths(13),
    where=st.integers(0, 12),
    bad_id=st.one_of(st.integers(-(2**40), -1), st.integers(V, 2**40)),
    decode=st.sampled_from(["speculative_decode", "prompt_lookup_decode"]),
)
def test_a_prompt_token_outside_the_vocabulary_raises_value_error(impl, T, where, bad_id, decode):
    target, draft = bad_input_models()
    prompt = make_prompt(T, T)
    prompt[0, where % T] = bad_id
    models = (target, draft) if decode == "speculative_decode" else (target,)
    bad = BadCall(
        f"{decode}(target, ..., prompt with token {bad_id} at index {where % T} of {T}, 3)",
        "a prompt token outside 0..vocab_size - 1",
        lambda impl: getattr(impl, decode)(*models, prompt, 3),
    )
    assert_value_error(bad, impl, match="prompt_ids")
