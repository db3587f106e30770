"""Level 1 of the KV-cache kata: the memory arithmetic and a preallocated cache.

Run: `nox -s kv_cache -- -k "1_cache"` or `pytest katas/kv_cache -k "1_cache" [--impl ...]`.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, note
from hypothesis import strategies as st

from grading.judge.cost import held_bytes, largest_tensor, measure
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.judge.strategies import gqa_heads, lengths, randn, seeds
from grading.judge.tolerance import assert_close, assert_error_within
from katas.kv_cache.cases import (
    EVERY_DTYPE,
    FLOAT_DTYPES,
    STORAGE_DTYPES,
    model_setups,
    strided_like,
    tiny_model,
)

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
    dtype=st.sampled_from(FLOAT_DTYPES),
)
@example(n_layers=1, n_kv_heads=1, head_dim=1, seq_len=0, batch_size=1, dtype=torch.float32)
@example(n_layers=1, n_kv_heads=1, head_dim=1, seq_len=1, batch_size=1, dtype=torch.float64)
def test_kv_cache_bytes_formula(impl, n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype):
    expected = 2 * n_layers * n_kv_heads * head_dim * seq_len * batch_size * dtype.itemsize
    got = impl.kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype)
    assert type(got) is int, f"kv_cache_bytes should return an int, got {type(got).__name__}"
    assert got == expected, (
        f"expected {expected} bytes, got {got}. Count keys AND values, every layer, every kv head, "
        f"and {dtype.itemsize} bytes per {dtype} number"
    )


def test_kv_cache_bytes_every_dtype(impl):
    """Every dtype torch defines, integer, 8-bit and complex ones included."""
    wrong = {}
    for dtype in EVERY_DTYPE:
        expected = 2 * 3 * 2 * 8 * 5 * 1 * dtype.itemsize
        got = impl.kv_cache_bytes(3, 2, 8, 5, 1, dtype)
        if got != expected:
            wrong[str(dtype)] = (expected, got)
    assert not wrong, (
        f"bytes (expected, got) for kv_cache_bytes(3, 2, 8, 5, 1, dtype): {wrong}. A number takes "
        "dtype.itemsize bytes; integer and 8-bit types are cached too (quantised caches), so "
        "don't read the width from torch.finfo or a table of float types"
    )


@given(
    n_layers=st.integers(1, 3),
    heads=gqa_heads(),
    head_dim=st.sampled_from([2, 8, 12]),
    max_seq_len=lengths(40),
    batch_size=st.integers(1, 3),
    dtype=st.sampled_from(FLOAT_DTYPES),
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
    T = max_seq_len // 2 + 1
    k = randn((batch_size, n_kv_heads, T, head_dim), seed=1, dtype=dtype)
    for layer in range(n_layers):
        cache.update(layer, k, k)
    held = held_bytes(cache)
    assert held == expected, (
        f"after {T} tokens the cache holds {held} bytes instead of the {expected} it allocated: "
        "copy the new keys and values into the preallocated storage; keeping the tensors you "
        "are given (or new ones) costs memory the formula does not count"
    )


# ----------------------------------------------------------------------------------------------
# KVCache.update / crop


@given(
    n_layers=st.integers(1, 3),
    heads=gqa_heads(),
    head_dim=st.sampled_from([1, 4, 8]),
    batch_size=st.integers(1, 3),
    chunks=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    dtype=st.sampled_from(FLOAT_DTYPES),
    seed=seeds(),
)
@example(
    n_layers=1, heads=(1, 1), head_dim=1, batch_size=1, chunks=[1], dtype=torch.bfloat16, seed=0
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
            assert cache.seq_len == sum(chunks[: step + 1]), (
                f"after layer {layer} took chunk {step}, seq_len should count layer 0's tokens, "
                f"{sum(chunks[: step + 1])}; got {cache.seq_len}"
            )
            written[layer][0].append(k)
            written[layer][1].append(v)
            want_k, want_v = (torch.cat(parts, dim=2) for parts in written[layer])
            note(f"step {step}, layer {layer}, chunk of {T}")
            assert k_all.shape == want_k.shape and k_all.dtype == dtype, (
                f"layer {layer}: k_all should be {dtype} [B, Hkv, L + T, D] = "
                f"{list(want_k.shape)}, got {k_all.dtype} {list(k_all.shape)}"
            )
            assert torch.equal(k_all, want_k), (
                f"layer {layer}: k_all differs from the keys appended so far (each layer keeps "
                "its own write position; a write at the wrong offset overwrites the past)"
            )
            assert torch.equal(v_all, want_v), (
                f"layer {layer}: v_all differs from the values appended"
            )
    assert cache.seq_len == total


@pytest.mark.parametrize("dtype", STORAGE_DTYPES, ids=str)
def test_cache_in_every_storage_dtype(impl, dtype):
    """The float types and the 8-bit types of quantised caches: stored bit for bit."""
    B, Hkv, D, S = 2, 2, 4, 7
    cache = impl.KVCache(2, B, Hkv, D, S, dtype=dtype)
    expected = impl.kv_cache_bytes(2, Hkv, D, S, B, dtype)
    assert held_bytes(cache) == expected, (
        f"a {dtype} cache should hold {expected} bytes, it holds {held_bytes(cache)}: allocate "
        "in the dtype asked for"
    )
    k = randn((B, Hkv, S, D), seed=1, scale=50.0).to(dtype)
    v = randn((B, Hkv, S, D), seed=2, scale=50.0).to(dtype)
    for layer in range(2):
        cache.update(layer, k[:, :, :3], v[:, :, :3])
        k_all, v_all = cache.update(layer, k[:, :, 3:], v[:, :, 3:])
        assert k_all.dtype == dtype and torch.equal(k_all, k) and torch.equal(v_all, v), (
            f"layer {layer}: a {dtype} cache should give back exactly the {dtype} keys and "
            f"values appended, got {k_all.dtype}"
        )


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
@pytest.mark.parametrize("k_layout, v_layout", [("transposed", "gapped"), ("gapped", "transposed")])
def test_update_accepts_any_layout(impl, dtype, k_layout, v_layout):
    """k and v are views with different strides (as a model's transposes produce)."""
    B, Hkv, T, D = 2, 3, 5, 4
    cache = impl.KVCache(2, B, Hkv, D, 2 * T, dtype=dtype)
    for step in range(2):
        for layer in range(2):
            k = randn((B, Hkv, T, D), seed=10 * step + layer, dtype=dtype)
            v = randn((B, Hkv, T, D), seed=10 * step + layer + 5, dtype=dtype)
            k_all, v_all = cache.update(layer, strided_like(k, k_layout), strided_like(v, v_layout))
            hint = (
                f"k is {k_layout} (strides {strided_like(k, k_layout).stride()}) and v is "
                f"{v_layout} (strides {strided_like(v, v_layout).stride()}): copy each by its "
                "own strides (slice assignment does), never one's strides for the other"
            )
            assert torch.equal(k_all[:, :, step * T :], k), f"keys differ. {hint}"
            assert torch.equal(v_all[:, :, step * T :], v), f"values differ. {hint}"


def test_update_keeps_its_own_copy(impl):
    """What the caller does with its tensors after update is none of the cache's business."""
    B, Hkv, D = 1, 2, 4
    cache = impl.KVCache(1, B, Hkv, D, 8)
    k, v = randn((B, Hkv, 3, D), seed=1), randn((B, Hkv, 3, D), seed=2)
    want_k, want_v = k.clone(), v.clone()
    cache.update(0, k, v)
    caller_changes(impl.KVCache.update, k, v)
    k.fill_(float("nan"))  # the caller reuses its buffers
    v.fill_(float("nan"))
    k_all, v_all = cache.update(0, randn((B, Hkv, 1, D), seed=3), randn((B, Hkv, 1, D), seed=4))
    assert torch.equal(k_all[:, :, :3], want_k) and torch.equal(v_all[:, :, :3], want_v), (
        "after the caller overwrote the tensors it passed to update, the cache's past changed: "
        "the cache kept references to them instead of copying into its own storage"
    )


@pytest.mark.parametrize("past", [40, 3000])
def test_update_never_concatenates_the_past(impl, past):
    B, Hkv, D = 2, 2, 8
    cache = impl.KVCache(1, B, Hkv, D, past + 24)
    cache.update(0, randn((B, Hkv, past, D), seed=1), randn((B, Hkv, past, D), seed=2))
    new = randn((B, Hkv, 1, D), seed=3)
    _, largest = largest_tensor(cache.update, 0, new, new)
    numbers = B * Hkv * past * D
    assert largest.numel < numbers, (
        f"one update after {past} cached tokens produced a tensor of {largest}; the past holds "
        f"{numbers} numbers. Write the new token into preallocated storage and return a view of "
        "it: torch.cat (or .clone/.contiguous) copies the whole past on every step"
    )


def test_update_costs_the_same_however_long_the_past(impl):
    """One token's update writes that token: its work (elements read and written) after 2,000
    cached tokens is what it is after 8, not a copy of the past piece by piece."""
    B, Hkv, D = 1, 2, 8
    work = {}
    for past in (8, 2000):
        cache = impl.KVCache(1, B, Hkv, D, past + 1)
        cache.update(0, randn((B, Hkv, past, D), seed=1), randn((B, Hkv, past, D), seed=2))
        new = randn((B, Hkv, 1, D), seed=3)
        _, seen = measure(cache.update, 0, new, new)
        work[past] = seen.work
    numbers = B * Hkv * 2000 * D  # the keys of 2,000 tokens
    assert work[2000] <= work[8] + numbers // 4, (
        f"a one-token update did {work[8]:,} units of work (elements read and written) after 8 "
        f"cached tokens but {work[2000]:,} after 2,000 (whose keys alone are {numbers:,} "
        "numbers): it copies the past on every step (slice by slice, or token by token). Write "
        "only the new tokens into the preallocated storage and return views of it"
    )


def test_long_sequences_are_kept_exactly(impl):
    """Thousands of tokens: a prefill, then single tokens up to max_seq_len exactly."""
    B, Hkv, D, S, prefill = 1, 2, 2, 4096, 4000
    cache = impl.KVCache(2, B, Hkv, D, S, dtype=torch.float16)
    keys = randn((B, Hkv, S, D), seed=7, dtype=torch.float16)
    for layer in range(2):
        cache.update(layer, keys[:, :, :prefill], -keys[:, :, :prefill])
    for t in range(prefill, S):
        for layer in range(2):
            k_all, v_all = cache.update(layer, keys[:, :, t : t + 1], -keys[:, :, t : t + 1])
    assert cache.seq_len == S
    assert torch.equal(k_all, keys) and torch.equal(v_all, -keys), (
        f"after {S} tokens (a prefill of {prefill}, then one at a time up to max_seq_len) the "
        "cache does not return exactly what was appended"
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
    length = keep.draw(
        st.one_of(st.sampled_from([0, prefix + extra]), st.integers(0, prefix + extra)),
        label="crop length",
    )
    cache.crop(length)
    assert cache.seq_len == length, f"after crop({length}), seq_len should be {length}"
    for layer in range(L):
        new_k = randn((B, Hkv, 2, D), seed=seed + 99 + layer)
        new_v = randn((B, Hkv, 2, D), seed=seed + 199 + layer)
        k_all, v_all = cache.update(layer, new_k, new_v)
        assert k_all.shape[2] == length + 2, (
            f"layer {layer}: after crop({length}) and 2 new tokens expected {length + 2} keys, "
            f"got {k_all.shape[2]}: crop must roll back every layer"
        )
        assert torch.equal(k_all[:, :, :length], first[2 * layer][:, :, :length])
        assert torch.equal(v_all[:, :, :length], first[2 * layer + 1][:, :, :length])
        assert torch.equal(k_all[:, :, length:], new_k) and torch.equal(v_all[:, :, length:], new_v)


@given(
    prefix=st.integers(0, 6),
    step=st.integers(1, 4),
    updated=st.integers(1, 2),
    keep=st.data(),
    seed=seeds(),
)
def test_crop_between_the_layers_updates_never_lengthens_a_layer(
    impl, prefix, step, updated, keep, seed
):
    """A crop in the middle of a step: the first `updated` layers hold `step` tokens more than
    the others. Every layer keeps min(what it holds, length); a shorter layer keeps all it has."""
    B, Hkv, D, L = 1, 1, 2, 3
    cache = impl.KVCache(L, B, Hkv, D, prefix + step + 1)
    keys = [randn((B, Hkv, prefix + step, D), seed=seed + i) for i in range(L)]
    held = [prefix + step if layer < updated else prefix for layer in range(L)]
    for layer in range(L):
        if prefix:
            cache.update(layer, keys[layer][:, :, :prefix], -keys[layer][:, :, :prefix])
    for layer in range(updated):
        part = keys[layer][:, :, prefix:]
        cache.update(layer, part, -part)
    length = keep.draw(
        st.one_of(st.integers(prefix, prefix + step), st.integers(0, prefix + step)),
        label="crop length",
    )
    cache.crop(length)
    for layer in range(L):
        new = randn((B, Hkv, 1, D), seed=seed + 50 + layer)
        k_all, v_all = cache.update(layer, new, -new)
        kept = min(held[layer], length)
        assert k_all.shape[2] == kept + 1, (
            f"layer {layer} held {held[layer]} tokens (layers 0..{updated - 1} had been updated "
            f"this step, the others not yet); after crop({length}) and one new token it should "
            f"return {kept + 1}, got {k_all.shape[2]}: crop keeps min(what a layer holds, "
            "length) and never lengthens a layer"
        )
        assert torch.equal(k_all[:, :, :kept], keys[layer][:, :, :kept])
        assert torch.equal(v_all[:, :, kept:], -new)


def test_refused_update_changes_nothing(impl):
    """An update that would pass max_seq_len raises, and the cache is as it was."""
    B, Hkv, D, S = 1, 2, 4, 6
    cache = impl.KVCache(2, B, Hkv, D, S)
    first = [randn((B, Hkv, 4, D), seed=i) for i in range(4)]
    cache.update(0, first[0], first[1])
    cache.update(1, first[2], first[3])
    too_many = randn((B, Hkv, 3, D), seed=9)
    for layer in (0, 1):
        with pytest.raises(ValueError, match="max_seq_len"):
            cache.update(layer, too_many, too_many)
    assert cache.seq_len == 4, "a refused update must leave seq_len as it was"
    for layer in (0, 1):
        last_k, last_v = randn((B, Hkv, 2, D), seed=20 + layer), randn((B, Hkv, 2, D), seed=30)
        k_all, v_all = cache.update(layer, last_k, last_v)  # exactly fills max_seq_len
        want_k = torch.cat([first[2 * layer], last_k], dim=2)
        want_v = torch.cat([first[2 * layer + 1], last_v], dim=2)
        assert torch.equal(k_all, want_k) and torch.equal(v_all, want_v), (
            f"layer {layer}: after a refused update, filling the cache to max_seq_len={S} should "
            "return the old tokens then the new ones: check the length before writing anything"
        )


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")], ids=["str", "torch.device"])
def test_smallest_cache(impl, device):
    """One layer, one sequence, one kv head of one number, room for one token."""
    cache = impl.KVCache(1, 1, 1, 1, 1, dtype=torch.float64, device=device)
    one = torch.full((1, 1, 1, 1), 3.5, dtype=torch.float64)
    k_all, v_all = cache.update(0, one, -one)
    assert torch.equal(k_all, one) and torch.equal(v_all, -one) and cache.seq_len == 1
    cache.crop(0)
    assert cache.seq_len == 0
    k_all, _ = cache.update(0, -one, one)
    assert torch.equal(k_all, -one), "after crop(0) the next token is written at position 0"


# ----------------------------------------------------------------------------------------------
# the cache inside the model


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


def test_cached_logits_at_far_positions(impl):
    """A prefill of 1,000 tokens, then single steps: positions far from the start."""
    model = tiny_model(seed=1, n_heads=4, n_kv_heads=2, dtype=torch.float64, max_seq_len=1024)
    c = model.config
    ids = torch.randint(0, c.vocab_size, (1, 1008), generator=torch.Generator().manual_seed(5))
    T = 1000
    cache = impl.KVCache(c.n_layers, 1, c.n_kv_heads, c.head_dim, 1008, dtype=torch.float64)
    with torch.no_grad():
        model(ids[:, :T], cache)
        got = torch.cat([model(ids[:, t : t + 1], cache) for t in range(T, 1008)], dim=1)
        want = model(ids)[:, T:]
    assert_close(
        got,
        want,
        hint="one token at a time after a 1,000-token prefill disagrees with the uncached model: "
        "a cache that wraps, truncates or misplaces long sequences",
    )


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


# ----------------------------------------------------------------------------------------------
# the error contract


def _cache(impl):
    """A cache of 2 layers, batch 1, 3 kv heads of 10, room for 6 tokens, holding 2 tokens."""
    cache = impl.KVCache(2, 1, 3, 10, 6)
    for layer in range(2):
        cache.update(layer, _kv(), _kv())
    return cache


def _kv(B=1, Hkv=3, T=2, D=10, dtype=torch.float32):
    return torch.zeros(B, Hkv, T, D, dtype=dtype)


def _longer_last_layer(impl):
    """_cache with one token more in layer 1 than in layer 0 (seq_len, layer 0's, stays 2)."""
    cache = _cache(impl)
    cache.update(1, _kv(T=1), _kv(T=1))
    return cache


def _bad(call, why, run, names):
    return pytest.param(BadCall(call, why, run), rf"\b{names}\b", id=why.replace(" ", "-"))


BYTES_ARGS = dict(n_layers=2, n_kv_heads=3, head_dim=10, seq_len=6, batch_size=1)
CACHE_ARGS = dict(n_layers=2, batch_size=1, n_kv_heads=3, head_dim=10, max_seq_len=6)


def _bytes_with(**changes):
    args = {**BYTES_ARGS, **changes}
    return lambda impl: impl.kv_cache_bytes(*args.values(), torch.float32)


def _cache_with(**changes):
    args = {**CACHE_ARGS, **changes}
    return lambda impl: impl.KVCache(*args.values())


BAD_CALLS = [
    _bad(
        "kv_cache_bytes(0, 3, 10, 6, 1, float32)", "no layers", _bytes_with(n_layers=0), "n_layers"
    ),
    _bad(  # a float of integer value is not an int either
        "kv_cache_bytes(2.0, 3, 10, 6, 1, float32)",
        "a float layer count",
        _bytes_with(n_layers=2.0),
        "n_layers",
    ),
    _bad(
        "kv_cache_bytes(2, 3, 10, 6.0, 1, float32)",
        "a float seq_len",
        _bytes_with(seq_len=6.0),
        "seq_len",
    ),
    _bad(
        "KVCache(2, 1, 3, 10.0, 6)",
        "a cache of float head_dim",
        _cache_with(head_dim=10.0),
        "head_dim",
    ),
    _bad(
        "kv_cache_bytes(2, -3, 10, 6, 1, float32)",
        "negative kv heads",
        _bytes_with(n_kv_heads=-3),
        "n_kv_heads",
    ),
    _bad(
        "kv_cache_bytes(2, 3, 0, 6, 1, float32)",
        "zero head_dim",
        _bytes_with(head_dim=0),
        "head_dim",
    ),
    _bad(
        "kv_cache_bytes(2, 3, 10.5, 6, 1, float32)",
        "a float head_dim",
        _bytes_with(head_dim=10.5),
        "head_dim",
    ),
    _bad(
        "kv_cache_bytes(2, 3, 10, -1, 1, float32)",
        "negative seq_len",
        _bytes_with(seq_len=-1),
        "seq_len",
    ),
    _bad(
        "kv_cache_bytes(2, 3, 10, 6, 0, float32)",
        "an empty batch",
        _bytes_with(batch_size=0),
        "batch_size",
    ),
    _bad(
        "kv_cache_bytes(2, 3, 10, 6, 1, 'float16')",
        "a dtype given as a string",
        lambda impl: impl.kv_cache_bytes(2, 3, 10, 6, 1, "float16"),
        "dtype",
    ),
    _bad("KVCache(0, 1, 3, 10, 6)", "a cache of no layers", _cache_with(n_layers=0), "n_layers"),
    _bad(
        "KVCache(2, 0, 3, 10, 6)",
        "a cache for an empty batch",
        _cache_with(batch_size=0),
        "batch_size",
    ),
    _bad(
        "KVCache(2, 1, 0, 10, 6)", "a cache of no kv heads", _cache_with(n_kv_heads=0), "n_kv_heads"
    ),
    _bad(
        "KVCache(2, 1, 3, -10, 6)",
        "a cache of negative head_dim",
        _cache_with(head_dim=-10),
        "head_dim",
    ),
    _bad(
        "KVCache(2, 1, 3, 10, 0)",
        "a cache with room for nothing",
        _cache_with(max_seq_len=0),
        "max_seq_len",
    ),
    _bad(
        "KVCache(2, 1, 3, 10, 6, dtype='float32')",
        "a cache dtype given as a string",
        lambda impl: impl.KVCache(2, 1, 3, 10, 6, dtype="float32"),
        "dtype",
    ),
    _bad(
        "update(2, k, v) on a 2-layer cache",
        "a layer past the last",
        lambda impl: _cache(impl).update(2, _kv(), _kv()),
        "layer",
    ),
    _bad(
        "update(-1, k, v)",
        "a negative layer",
        lambda impl: _cache(impl).update(-1, _kv(), _kv()),
        "layer",
    ),
    _bad(
        "update(0, k of shape [1, 4, 2, 10], v)",
        "k with the wrong number of kv heads",
        lambda impl: _cache(impl).update(0, _kv(Hkv=4), _kv()),
        "k",
    ),
    _bad(
        "update(0, k, v of shape [1, 3, 2, 11])",
        "v with the wrong head_dim",
        lambda impl: _cache(impl).update(0, _kv(), _kv(D=11)),
        "v",
    ),
    _bad(
        "update(0, k of shape [3, 2, 10], v)",
        "k without the batch dimension",
        lambda impl: _cache(impl).update(0, _kv()[0], _kv()),
        "k",
    ),
    _bad(
        "update(0, k of shape [2, 3, 2, 10], v)",
        "k with the wrong batch size",
        lambda impl: _cache(impl).update(0, _kv(B=2), _kv()),
        "k",
    ),
    _bad(
        "update(0, k of 2 tokens, v of 1 token)",
        "k and v of different lengths",
        lambda impl: _cache(impl).update(0, _kv(), _kv(T=1)),
        "[kv]",  # either may be named
    ),
    _bad(
        "update(0, k of 0 tokens, v of 0 tokens)",
        "no new token",
        lambda impl: _cache(impl).update(0, _kv(T=0), _kv(T=0)),
        "k",
    ),
    _bad(
        "update(0, k in float16, v) on a float32 cache",
        "k in another dtype",
        lambda impl: _cache(impl).update(0, _kv(dtype=torch.float16), _kv()),
        "k",
    ),
    _bad(
        "update(0, k, v in float64) on a float32 cache",
        "v in another dtype",
        lambda impl: _cache(impl).update(0, _kv(), _kv(dtype=torch.float64)),
        "v",
    ),
    _bad(
        "update(0, k, v of 5 tokens) with 2 of 6 cached",
        "an update past max_seq_len",
        lambda impl: _cache(impl).update(0, _kv(T=5), _kv(T=5)),
        "max_seq_len",
    ),
    _bad("crop(-1)", "a negative crop length", lambda impl: _cache(impl).crop(-1), "length"),
    _bad(
        "crop(3) with 2 cached", "a crop past seq_len", lambda impl: _cache(impl).crop(3), "length"
    ),
    _bad("crop(1.0)", "a float crop length", lambda impl: _cache(impl).crop(1.0), "length"),
    _bad(
        "crop(3) with 2 cached in layer 0 and 3 in layer 1",
        "a crop past seq_len that a longer layer holds",
        lambda impl: _longer_last_layer(impl).crop(3),
        "length",
    ),
]


@pytest.mark.parametrize("bad, names", BAD_CALLS)
def test_bad_input_raises_value_error(impl, bad, names):
    assert_value_error(bad, impl, match=names)


@pytest.mark.parametrize(
    "k_shape",
    [(1, 4, 2, 10), (3, 2, 10), (2, 3, 2, 10), (1, 3, 2, 11)],
    ids=["kv-heads", "no-batch", "batch", "head_dim"],
)
def test_shape_errors_quote_the_expected_shape(impl, k_shape):
    cache = _cache(impl)
    with pytest.raises(ValueError) as info:
        cache.update(0, torch.zeros(k_shape), _kv())
    message = str(info.value)
    assert "3" in message and "10" in message, (
        f"update(0, k of shape {list(k_shape)}, v): the ValueError should quote the expected "
        f"shape [1, 3, T, 10]; it said {message!r}"
    )
