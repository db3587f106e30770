"""Tests for the KV-cache kata. Run: `nox -s kv_cache` or `pytest katas/kv_cache [--impl ...]`."""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.cost import CountingModel, count_flops, held_bytes, largest_tensor
from grading.model import greedy_generate_no_cache, make_model
from grading.strategies import gqa_heads, lengths, randn, seeds
from grading.tolerance import assert_close, assert_error_within

ALL_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


# ----------------------------------------------------------------------------------------------
# kv_cache_bytes


def test_kv_cache_bytes_of_real_models(impl):
    # Llama-2-7B: 32 layers, 32 kv heads of 128, fp16: 0.5 MiB per token.
    assert impl.kv_cache_bytes(32, 32, 128, 1, 1, torch.float16) == 524_288, (
        "Llama-2-7B keeps 2 (k and v) x 32 layers x 32 heads x 128 dims x 2 bytes per token"
    )
    # Llama-3-8B uses grouped-query attention: 8 kv heads, a quarter of that.
    assert impl.kv_cache_bytes(32, 8, 128, 8192, 4, torch.bfloat16) == 131_072 * 8192 * 4


@given(
    n_layers=st.integers(1, 80),
    n_kv_heads=st.integers(1, 64),
    head_dim=st.sampled_from([1, 7, 64, 128]),
    seq_len=st.integers(0, 100_000),
    batch_size=st.integers(1, 64),
    dtype=st.sampled_from(ALL_DTYPES),
)
def test_kv_cache_bytes_formula(impl, n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype):
    expected = 2 * n_layers * n_kv_heads * head_dim * seq_len * batch_size * dtype.itemsize
    got = impl.kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype)
    assert got == expected, (
        f"expected {expected} bytes, got {got}. Count keys AND values, every layer, every kv head, "
        f"and {dtype.itemsize} bytes per {dtype} number"
    )


@given(
    n_layers=st.integers(1, 3),
    heads=gqa_heads(),
    head_dim=st.sampled_from([2, 8, 12]),
    max_seq_len=lengths(40),
    batch_size=st.integers(1, 3),
    dtype=st.sampled_from(ALL_DTYPES),
)
def test_cache_holds_exactly_what_the_formula_says(
    impl, n_layers, heads, head_dim, max_seq_len, batch_size, dtype
):
    _, n_kv_heads = heads
    cache = impl.KVCache(n_layers, batch_size, n_kv_heads, head_dim, max_seq_len, dtype=dtype)
    expected = impl.kv_cache_bytes(n_layers, n_kv_heads, head_dim, max_seq_len, batch_size, dtype)
    held = held_bytes(cache)
    assert held == expected, (
        f"the cache's tensors hold {held} bytes but kv_cache_bytes says {expected} for "
        f"max_seq_len={max_seq_len}: allocate keys and values for every layer once, in `dtype`"
    )


# ----------------------------------------------------------------------------------------------
# KVCache.update / crop


@given(
    n_layers=st.integers(1, 3),
    heads=gqa_heads(),
    head_dim=st.sampled_from([1, 4, 8]),
    batch_size=st.integers(1, 3),
    chunks=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    dtype=st.sampled_from(ALL_DTYPES),
    seed=seeds(),
)
def test_update_returns_everything_appended(
    impl, n_layers, heads, head_dim, batch_size, chunks, dtype, seed
):
    _, Hkv = heads
    total = sum(chunks)
    cache = impl.KVCache(n_layers, batch_size, Hkv, head_dim, total + 1, dtype=dtype)
    written = {layer: ([], []) for layer in range(n_layers)}
    for step, T in enumerate(chunks):
        assert cache.seq_len == sum(chunks[:step]), "seq_len must count the tokens cached so far"
        for layer in range(n_layers):
            s = seed + 1000 * step + 10 * layer
            k = randn((batch_size, Hkv, T, head_dim), seed=s, dtype=dtype)
            v = randn((batch_size, Hkv, T, head_dim), seed=s + 1, dtype=dtype)
            k_all, v_all = cache.update(layer, k, v)
            written[layer][0].append(k)
            written[layer][1].append(v)
            want_k, want_v = (torch.cat(parts, dim=2) for parts in written[layer])
            note(f"step {step}, layer {layer}, chunk of {T}")
            assert k_all.shape == want_k.shape, (
                f"layer {layer}: k_all should be [B, Hkv, L + T, D] = {list(want_k.shape)}, got "
                f"{list(k_all.shape)}"
            )
            assert torch.equal(k_all, want_k), (
                f"layer {layer}: k_all differs from the keys appended so far (each layer keeps "
                "its own write position; a write at the wrong offset overwrites the past)"
            )
            assert torch.equal(v_all, want_v), (
                f"layer {layer}: v_all differs from the values appended"
            )
    assert cache.seq_len == total


def test_update_never_concatenates_the_past(impl):
    B, Hkv, D, S = 2, 2, 8, 64
    cache = impl.KVCache(1, B, Hkv, D, S)
    cache.update(0, randn((B, Hkv, 40, D), seed=1), randn((B, Hkv, 40, D), seed=2))
    new = randn((B, Hkv, 1, D), seed=3)
    _, largest = largest_tensor(cache.update, 0, new, new)
    past = B * Hkv * 40 * D
    assert largest.numel < past, (
        f"one update after 40 cached tokens produced a tensor of {largest}; the past holds {past} "
        "numbers. Write the new token into preallocated storage and return a view of it: "
        "torch.cat (or .clone/.contiguous) copies the whole past on every step"
    )


@given(
    prefix=st.integers(1, 10),
    extra=st.integers(1, 10),
    keep=st.data(),
    seed=seeds(),
)
def test_crop_then_append_overwrites_the_tail(impl, prefix, extra, keep, seed):
    B, Hkv, D, L = 1, 2, 4, 2
    cache = impl.KVCache(L, B, Hkv, D, prefix + extra + 2)
    first = [randn((B, Hkv, prefix + extra, D), seed=seed + i) for i in range(2 * L)]
    for layer in range(L):
        cache.update(layer, first[2 * layer], first[2 * layer + 1])
    length = keep.draw(st.integers(0, prefix + extra), label="crop length")
    cache.crop(length)
    assert cache.seq_len == length, f"after crop({length}), seq_len should be {length}"
    for layer in range(L):
        new = randn((B, Hkv, 2, D), seed=seed + 99 + layer)
        k_all, v_all = cache.update(layer, new, new)
        assert k_all.shape[2] == length + 2, (
            f"layer {layer}: after crop({length}) and 2 new tokens expected {length + 2} keys, "
            f"got {k_all.shape[2]}: crop must roll back every layer"
        )
        assert torch.equal(k_all[:, :, :length], first[2 * layer][:, :, :length])
        assert torch.equal(v_all[:, :, :length], first[2 * layer + 1][:, :, :length])
        assert torch.equal(k_all[:, :, length:], new)


def test_bad_input_gets_a_value_error_that_says_what_was_expected(impl):
    n_kv_heads, head_dim = 3, 10
    cache = impl.KVCache(2, 1, n_kv_heads, head_dim, 6)
    good = torch.zeros(1, n_kv_heads, 2, head_dim)
    cases = {
        "k with the wrong number of kv heads": (0, torch.zeros(1, 4, 2, head_dim), good),
        "v with the wrong head_dim": (0, good, torch.zeros(1, n_kv_heads, 2, head_dim + 1)),
        "k without the batch dimension": (0, torch.zeros(n_kv_heads, 2, head_dim), good),
        "k with the wrong batch size": (0, torch.zeros(2, n_kv_heads, 2, head_dim), good),
    }
    for what, (layer, k, v) in cases.items():
        with pytest.raises(ValueError) as info:
            cache.update(layer, k, v)
        message = str(info.value)
        assert str(n_kv_heads) in message and str(head_dim) in message, (
            f"{what}: the ValueError should say the expected shape "
            f"[B, {n_kv_heads}, T, {head_dim}]; it said {message!r}"
        )
    for layer in (2, -1):
        with pytest.raises(ValueError, match="layer"):
            cache.update(layer, good, good)
    cache.update(0, good, good)
    with pytest.raises(ValueError, match="max_seq_len"):
        cache.update(
            0, torch.zeros(1, n_kv_heads, 5, head_dim), torch.zeros(1, n_kv_heads, 5, head_dim)
        )
    assert cache.seq_len == 2, "a refused update must leave the cache unchanged"
    for length in (-1, 3):
        with pytest.raises(ValueError, match="length"):
            cache.crop(length)


# ----------------------------------------------------------------------------------------------
# generate


@functools.lru_cache(maxsize=64)
def tiny_model(seed: int, n_heads: int, n_kv_heads: int, dtype: torch.dtype):
    """The shared model, built once per recipe (building it is most of an example's time)."""
    return make_model(seed, dtype, n_heads=n_heads, n_kv_heads=n_kv_heads)


@st.composite
def model_setups(draw):
    """(model recipe, prompt): tiny_model(**recipe, dtype=...) builds the model in any dtype."""
    n_heads, n_kv_heads = draw(
        gqa_heads(max_kv_heads=2, max_group=4), label="(n_heads, n_kv_heads)"
    )
    recipe = dict(
        seed=draw(st.integers(0, 3), label="model seed"), n_heads=n_heads, n_kv_heads=n_kv_heads
    )
    B = draw(st.integers(1, 3), label="batch")
    T = draw(lengths(12), label="prompt length")
    prompt_seed = draw(seeds(), label="prompt seed")
    prompt = torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(prompt_seed))
    return recipe, prompt


@given(setup=model_setups(), max_new_tokens=st.integers(1, 10))
def test_generate_matches_the_uncached_generator(impl, setup, max_new_tokens):
    recipe, prompt = setup
    model = tiny_model(dtype=torch.float64, **recipe)
    got = impl.generate(model, prompt, max_new_tokens)
    expected = greedy_generate_no_cache(model, prompt, max_new_tokens)
    assert got.dtype == torch.long and got.shape == expected.shape, (
        f"expected a LongTensor {list(expected.shape)}, got {got.dtype} {list(got.shape)}"
    )
    T = prompt.shape[1]
    first_bad = (got != expected).any(0).nonzero()
    assert first_bad.numel() == 0, (
        f"tokens differ from the uncached generator from position {int(first_bad[0])} "
        f"(prompt length {T}):\n expected {expected.tolist()}\n got      {got.tolist()}\n"
        "Usually: the new token fed at the wrong position, keys written at the wrong offset, "
        "or the cache not shared across calls"
    )


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


def test_generate_flops_grow_linearly(impl, figures):
    """FLOPs of an ideal cached generate, derived from the model's shapes.

    Per token, every layer multiplies it through wq, wk, wv, wo (dim x {H, Hkv, Hkv, H}·hd) and
    the MLP (3 x dim x hidden), then lm_head (dim x vocab): 2 FLOPs per weight. Attention of one
    query over c keys costs 2·H·hd·c for the scores and as much for the weighted sum.
    """
    model = make_model(0, torch.float32)
    c = model.config
    B, T, n = 2, 8, 40
    weights = c.dim * (c.n_heads + 2 * c.n_kv_heads) * c.head_dim + c.n_heads * c.head_dim * c.dim
    per_token = 2 * (c.n_layers * (weights + 3 * c.dim * c.hidden_dim) + c.dim * c.vocab_size)

    def attention(queries: int, keys: int) -> int:
        return c.n_layers * 4 * c.n_heads * c.head_dim * queries * keys

    ideal = B * (T * per_token + attention(T, T))  # the prefill
    ideal += B * sum(per_token + attention(1, T + i) for i in range(1, n))  # one token per step
    refeed = B * sum((T + i) * per_token + attention(T + i, T + i) for i in range(n))
    prompt = torch.randint(0, c.vocab_size, (B, T), generator=torch.Generator().manual_seed(0))
    _, flops = count_flops(impl.generate, model, prompt, n)
    figures.record("generate FLOPs / ideal cached FLOPs", flops / ideal, "x", new_tokens=n)
    assert flops <= 1.01 * ideal, (
        f"generate spent {flops:,} FLOPs for {n} new tokens; a cached generate needs {ideal:,} "
        f"(re-feeding the whole sequence every step costs {refeed:,}). Feed only the newest "
        "token after the prompt, and let the cache supply the past"
    )


@given(setup=model_setups(), data=st.data())
def test_cached_logits_agree_at_every_step(impl, setup, data):
    """Teacher-forced: prefill, then one token at a time, against the whole sequence uncached."""
    recipe, prompt = setup
    dtype = data.draw(st.sampled_from([torch.float32, torch.float64]), label="dtype")
    model = tiny_model(dtype=dtype, **recipe)
    extra = data.draw(st.integers(1, 6), label="tokens after the prompt")
    c = model.config
    B, T = prompt.shape
    more = torch.randint(
        0, c.vocab_size, (B, extra), generator=torch.Generator().manual_seed(extra)
    )
    ids = torch.cat([prompt, more], dim=1)
    cache = impl.KVCache(c.n_layers, B, c.n_kv_heads, c.head_dim, T + extra, dtype=dtype)
    with torch.no_grad():
        steps = [model(ids[:, :T], cache)]
        steps += [model(ids[:, t : t + 1], cache) for t in range(T, T + extra)]
        got = torch.cat(steps, dim=1)  # (B, T + extra, vocab)
        oracle = tiny_model(dtype=torch.float64, **recipe)(ids)
        baseline = model(ids)  # the same model, same dtype, no cache
    hint = "a cached step attends to keys at the wrong positions or misses some"
    if dtype == torch.float64:
        assert_close(got, oracle, hint=hint)
    else:
        assert_error_within(got, oracle, baseline, factor=2.0, hint=hint)


@given(setup=model_setups(), data=st.data())
def test_crop_then_decode_equals_a_fresh_prefix(impl, setup, data):
    recipe, prompt = setup
    model = tiny_model(dtype=torch.float64, **recipe)
    c = model.config
    B, T = prompt.shape
    extra = data.draw(st.integers(1, 5), label="tokens after the prompt")
    keep = data.draw(st.integers(1, T + extra), label="crop to")
    more = data.draw(st.integers(1, 4), label="tokens after the crop")
    ids = torch.randint(
        0, c.vocab_size, (B, T + extra + more), generator=torch.Generator().manual_seed(keep)
    )
    size = T + extra + more
    with torch.no_grad():
        cache = impl.KVCache(c.n_layers, B, c.n_kv_heads, c.head_dim, size, dtype=torch.float64)
        model(ids[:, : T + extra], cache)
        cache.crop(keep)
        got = model(ids[:, keep : keep + more], cache)
        fresh = impl.KVCache(c.n_layers, B, c.n_kv_heads, c.head_dim, size, dtype=torch.float64)
        model(ids[:, :keep], fresh)
        want = model(ids[:, keep : keep + more], fresh)
    assert_close(
        got,
        want,
        hint=f"after crop({keep}) the cache must behave like one that only ever saw {keep} tokens",
    )


def test_generate_validates_its_arguments(impl):
    model = make_model(0, torch.float32, max_seq_len=16)
    prompt = torch.zeros(1, 10, dtype=torch.long)
    with pytest.raises(ValueError):
        impl.generate(model, prompt, 7)  # 17 positions > max_seq_len
    with pytest.raises(ValueError):
        impl.generate(model, torch.zeros(10, dtype=torch.long), 2)  # no batch dimension
    out = impl.generate(model, prompt, 0)
    assert torch.equal(out, prompt), "max_new_tokens=0 returns the prompt unchanged"
