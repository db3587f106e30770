"""Level 2 of the KV-cache kata: greedy generation with the cache.

Run: `nox -s kv_cache -- -k "2_generate"` or `pytest katas/kv_cache -k "2_generate" [--impl ...]`.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.cost import CountingModel, count_flops
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.judge.tolerance import tolerance_for
from grading.model import greedy_generate_no_cache, load_weights_in_place, make_model
from katas.kv_cache.cases import model_setups, tiny_model

MHA = dict(seed=0, n_heads=2, n_kv_heads=2)


def assert_same_tokens(got: torch.Tensor, expected: torch.Tensor, T: int) -> None:
    __tracebackhide__ = True
    assert isinstance(got, torch.Tensor) and got.dtype == torch.long, (
        f"generate should return a LongTensor, got {getattr(got, 'dtype', type(got).__name__)}"
    )
    assert got.shape == expected.shape, (
        f"expected shape {list(expected.shape)} (prompt + new tokens), got {list(got.shape)}"
    )
    first_bad = (got != expected).any(0).nonzero()
    assert first_bad.numel() == 0, (
        f"tokens differ from the uncached generator from position {int(first_bad[0])} "
        f"(prompt length {T}):\n expected {expected.tolist()}\n got      {got.tolist()}\n"
        "Usually: the new token fed at the wrong position, keys written at the wrong offset, "
        "or the cache not shared across calls"
    )


@given(setup=model_setups(), max_new_tokens=st.integers(1, 10))
@example(setup=(MHA, torch.tensor([[5]])), max_new_tokens=1)
@example(setup=(MHA, torch.tensor([[5], [9]])), max_new_tokens=2)
def test_generate_matches_the_uncached_generator(impl, setup, max_new_tokens):
    recipe, prompt = setup
    model = tiny_model(dtype=torch.float64, **recipe)
    got = impl.generate(model, prompt, max_new_tokens)
    expected = greedy_generate_no_cache(model, prompt, max_new_tokens)
    assert_same_tokens(got, expected, prompt.shape[1])


@given(setup=model_setups(), max_new_tokens=st.integers(1, 8))
def test_generate_calls_the_model_once_per_token(impl, setup, max_new_tokens):
    recipe, prompt = setup
    counting = CountingModel(tiny_model(dtype=torch.float64, **recipe))
    impl.generate(counting, prompt, max_new_tokens)
    T = prompt.shape[1]
    want = [T] + [1] * (max_new_tokens - 1)
    assert counting.tokens_fed == want, (
        f"tokens fed per model call should be {want} (the whole prompt once, then only the newest "
        f"token), got {counting.tokens_fed}"
    )
    cached = [c.cache_len for c in counting.calls]
    want = [0] + list(range(T, T + max_new_tokens - 1))
    assert cached == want, (
        f"cache.seq_len before each call should be {want}, got {cached}: create one cache and "
        "pass it to every call"
    )


@pytest.mark.parametrize("B, T, n", [(2, 8, 40), (1, 96, 12)], ids=["short-prompt", "long-prompt"])
def test_generate_flops_grow_linearly(impl, figures, B, T, n):
    """FLOPs of an ideal cached generate, derived from the model's shapes.

    Per token, every layer multiplies it through wq, wk, wv, wo (dim x {H, Hkv, Hkv, H}·hd) and
    the MLP (3 x dim x hidden), then lm_head (dim x vocab): 2 FLOPs per weight. Attention of one
    query over c keys costs 2·H·hd·c for the scores and as much for the weighted sum.
    """
    model = make_model(0, torch.float32)
    c = model.config
    weights = c.dim * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim + c.n_heads * c.head_dim * c.dim
    per_token = 2 * (c.n_layers * (weights + 3 * c.dim * c.hidden_dim) + c.dim * c.vocab_size)

    def attention(queries: int, keys: int) -> int:
        return c.n_layers * 4 * c.n_heads * c.head_dim * queries * keys

    ideal = B * (T * per_token + attention(T, T))  # the prefill
    ideal += B * sum(per_token + attention(1, T + i) for i in range(1, n))  # one token per step
    refeed = B * sum((T + i) * per_token + attention(T + i, T + i) for i in range(n))
    prompt = torch.randint(0, c.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
    _, flops = count_flops(impl.generate, model, prompt, n)
    figures.record("generate FLOPs / ideal cached FLOPs", flops / ideal, "x", new_tokens=n, T=T)
    assert flops <= 1.01 * ideal, (
        f"generate spent {flops:,} FLOPs for {n} new tokens after a {T}-token prompt; a cached "
        f"generate needs {ideal:,} (re-feeding the whole sequence every step costs {refeed:,}). "
        "Feed only the newest token after the prompt, and let the cache supply the past"
    )


def test_generate_follows_weights_changed_in_place_between_calls(impl):
    """A model's weights may change in place between two calls (a checkpoint loaded into it):
    each call decodes with the weights it finds, nothing derived from them is kept."""
    model = make_model(0, torch.float64, n_heads=4, n_kv_heads=2)
    prompt = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(4))
    before = impl.generate(model, prompt, 6)
    caller_changes(impl.generate, model)
    load_weights_in_place(model, seed=3)
    expected = greedy_generate_no_cache(model, prompt, 6)
    assert not torch.equal(expected, before), "the test's new weights must change the tokens"
    got = impl.generate(model, prompt, 6)
    assert_same_tokens(got, expected, 5)


def test_generate_long_prompt_up_to_max_seq_len(impl):
    """A 1,020-token prompt and 4 new tokens fill the model's 1,024 positions exactly."""
    model = tiny_model(seed=2, n_heads=4, n_kv_heads=1, dtype=torch.float64, max_seq_len=1024)
    prompt = torch.randint(0, 64, (1, 1020), generator=torch.Generator().manual_seed(3))
    got = impl.generate(model, prompt, 4)
    assert_same_tokens(got, greedy_generate_no_cache(model, prompt, 4), 1020)


def test_generate_may_fill_max_seq_len_exactly(impl):
    model = tiny_model(seed=0, n_heads=4, n_kv_heads=2, dtype=torch.float64, max_seq_len=16)
    prompt = torch.randint(0, 64, (1, 10), generator=torch.Generator().manual_seed(1))
    got = impl.generate(model, prompt, 6)  # 10 + 6 = 16 positions: allowed
    assert_same_tokens(got, greedy_generate_no_cache(model, prompt, 6), 10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_generate_in_every_dtype(impl, dtype):
    """In low precision a cached step may round differently from the uncached model, so each new
    token must be a greedy choice of the uncached model in the same dtype, up to rounding."""
    model = tiny_model(seed=1, n_heads=4, n_kv_heads=2, dtype=dtype)
    prompt = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(4))
    n = 6
    got = impl.generate(model, prompt, n)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.long and got.shape == (2, 7 + n), (
        f"expected a LongTensor [2, {7 + n}], got {getattr(got, 'dtype', type(got).__name__)} "
        f"{list(getattr(got, 'shape', []))}"
    )
    assert torch.equal(got[:, :7], prompt), "the output must start with the prompt"
    with torch.no_grad():
        logits = model(got[:, :-1])[:, 6:].double()  # (B, n, vocab): what predicts each new token
    chosen = logits.gather(-1, got[:, 7:, None])[..., 0]  # (B, n)
    best = logits.max(dim=-1).values
    tol = tolerance_for(dtype)
    slack = 8 * (tol.atol * logits.abs().max() + tol.rtol * best.abs())
    short = best - chosen - slack
    assert bool((short <= 0).all()), (
        f"with a {dtype} model, new token(s) at {(short > 0).nonzero().tolist()} (batch, step) are "
        f"not the greedy choice: their logit is {float((best - chosen).max()):.3g} below the best, "
        f"more than rounding in {dtype} explains. Make the cache in the model's dtype "
        "(next(model.parameters()).dtype) and feed each new token at its position"
    )


@pytest.mark.parametrize("layout", ["column-slice", "transposed"])
def test_generate_accepts_any_layout(impl, layout):
    model = tiny_model(dtype=torch.float64, **MHA)
    prompt = torch.randint(0, 64, (3, 6), generator=torch.Generator().manual_seed(8))
    if layout == "column-slice":
        wide = torch.zeros(3, 12, dtype=torch.long)
        wide[:, ::2] = prompt
        strided = wide[:, ::2]
    else:
        strided = prompt.t().contiguous().t()
    got = impl.generate(model, strided, 5)
    assert_same_tokens(got, greedy_generate_no_cache(model, prompt, 5), 6)


def test_generate_zero_new_tokens_returns_the_prompt(impl):
    model = tiny_model(dtype=torch.float64, **MHA)
    prompt = torch.randint(0, 64, (2, 10), generator=torch.Generator().manual_seed(2))
    out = impl.generate(model, prompt, 0)
    assert isinstance(out, torch.Tensor) and torch.equal(out, prompt), (
        "max_new_tokens=0 returns the prompt unchanged"
    )


# ----------------------------------------------------------------------------------------------
# the error contract


def _model():
    return tiny_model(seed=0, n_heads=4, n_kv_heads=2, dtype=torch.float32, max_seq_len=16)


PROMPT = torch.zeros(1, 10, dtype=torch.long)


def _bad(call, why, run, names):
    return pytest.param(BadCall(call, why, run), rf"\b{names}\b", id=why.replace(" ", "-"))


BAD_CALLS = [
    _bad(
        "generate(model, prompt of shape [10], 2)",
        "no batch dimension",
        lambda impl: impl.generate(_model(), PROMPT[0], 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, prompt of shape [1, 1, 10], 2)",
        "an extra dimension",
        lambda impl: impl.generate(_model(), PROMPT[None], 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, float prompt, 2)",
        "a float prompt",
        lambda impl: impl.generate(_model(), PROMPT.float(), 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, int32 prompt, 2)",
        "an int32 prompt",
        lambda impl: impl.generate(_model(), PROMPT.int(), 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, prompt of shape [1, 0], 2)",
        "an empty prompt",
        lambda impl: impl.generate(_model(), PROMPT[:, :0], 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, prompt of shape [0, 10], 2)",
        "an empty batch",
        lambda impl: impl.generate(_model(), PROMPT[:0], 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, [[1, 2, 64]], 2) with vocab_size 64",
        "a token id past the vocabulary",
        lambda impl: impl.generate(_model(), torch.tensor([[1, 2, 64]]), 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, [[1, -1, 3]], 2)",
        "a negative token id",
        lambda impl: impl.generate(_model(), torch.tensor([[1, -1, 3]]), 2),
        "prompt_ids",
    ),
    _bad(
        "generate(model, prompt, -1)",
        "negative max_new_tokens",
        lambda impl: impl.generate(_model(), PROMPT, -1),
        "max_new_tokens",
    ),
    _bad(
        "generate(model, prompt, 2.0)",
        "a float max_new_tokens",
        lambda impl: impl.generate(_model(), PROMPT, 2.0),
        "max_new_tokens",
    ),
    _bad(
        "generate(model, 10-token prompt, 7) with max_seq_len 16",
        "more positions than max_seq_len",
        lambda impl: impl.generate(_model(), PROMPT, 7),
        "max_seq_len",
    ),
    _bad(
        "generate(model, 17-token prompt, 0) with max_seq_len 16",
        "a prompt longer than max_seq_len",
        lambda impl: impl.generate(_model(), torch.zeros(1, 17, dtype=torch.long), 0),
        "max_seq_len",
    ),
]


@pytest.mark.parametrize("bad, names", BAD_CALLS)
def test_generate_bad_input_raises_value_error(impl, bad, names):
    assert_value_error(bad, impl, match=names)
