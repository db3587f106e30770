"""Level 5: decoding with a rolling window of keys (a ring-buffer cache and RoPE).

Run: `pytest katas/efficient_attention -k 5_decode [--impl ...]`.
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.cost import held_bytes
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.oracles import attention_oracle
from grading.judge.strategies import gqa_heads, randn, seeds
from grading.judge.tolerance import assert_close
from katas.efficient_attention.cases import (
    DTYPES,
    band_mask,
    rope_at_positions,
    strided_like_a_model,
)


@st.composite
def decode_cases(draw):
    B = draw(st.integers(1, 2))
    H, Hkv = draw(gqa_heads(2, 2))
    D = draw(st.sampled_from([2, 8, 16]))
    window = draw(st.integers(1, 5))
    steps = draw(st.integers(1, 3 * window + 2))
    return B, H, Hkv, D, window, steps, draw(st.sampled_from(DTYPES)), draw(seeds())


def decode(impl, q, k, v, window, dtype, **options):
    """Run sliding_window_decode_step over every position; return the outputs and the cache."""
    B, Hkv, N, D = k.shape
    cache = impl.RollingKVCache(window, B, Hkv, D, dtype=dtype)
    outs = [
        impl.sliding_window_decode_step(q[:, :, t], k[:, :, t], v[:, :, t], cache, **options)
        for t in range(N)
    ]
    return torch.stack(outs, dim=2), cache


def decode_oracle(q, k, v, window, dtype, *, rope_base=10000.0, sm_scale=None):
    """float64 sliding-window attention over q and k rotated to positions 0 .. N - 1."""
    N = q.shape[2]
    # The cache stores rotated keys in its dtype; the oracle rounds them the same way.
    k_rot = rope_at_positions(k, rope_base).to(dtype)
    return attention_oracle(
        rope_at_positions(q, rope_base), k_rot, v, causal=True, sm_scale=sm_scale,
        mask=band_mask(N, N, window),
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------
# The rolling cache


def test_rolling_cache_append_returns_the_window(impl):
    cache = impl.RollingKVCache(3, 1, 2, 4)
    sizes = []
    for t in range(5):
        keys, values = cache.append(
            torch.full((1, 2, 4), float(t)), torch.full((1, 2, 4), float(t))
        )
        sizes.append(keys.shape[2])
        assert keys.shape == values.shape
    assert sizes == [1, 2, 3, 3, 3], f"append returns min(seq_len, window) keys, got sizes {sizes}"
    assert held_bytes(cache) <= 2 * 2 * 3 * 4 * 4, (
        f"a float32 cache of window 3 for 2 kv heads of dim 4 holds {held_bytes(cache)} bytes "
        "after 5 tokens; keys and values need 2 x 2 x 3 x 4 x 4 B = 192: overwrite the oldest slot"
    )
    assert sorted(keys[0, 0, :, 0].tolist()) == [2.0, 3.0, 4.0], (
        "after 5 tokens in a window of 3 the cache must hold tokens 2, 3, 4, "
        f"got {keys[0, 0, :, 0].tolist()}"
    )


_cache = lambda impl: impl.RollingKVCache(2, 1, 2, 4)  # noqa: E731 - a fresh cache per bad call
_z = torch.zeros

BAD_CALLS = [
    BadCall("RollingKVCache(0, 1, 1, 4)", "window 0", lambda impl: impl.RollingKVCache(0, 1, 1, 4)),
    BadCall("RollingKVCache(-2, 1, 1, 4)", "a negative window",
            lambda impl: impl.RollingKVCache(-2, 1, 1, 4)),
    BadCall("RollingKVCache(2, 0, 1, 4)", "batch 0", lambda impl: impl.RollingKVCache(2, 0, 1, 4)),
    BadCall("RollingKVCache(2, 1, 0, 4)", "no kv heads",
            lambda impl: impl.RollingKVCache(2, 1, 0, 4)),
    BadCall("RollingKVCache(2, 1, 1, 0)", "head_dim 0",
            lambda impl: impl.RollingKVCache(2, 1, 1, 0)),
    BadCall("RollingKVCache(2.5, 1, 1, 4)", "a window that is no int",
            lambda impl: impl.RollingKVCache(2.5, 1, 1, 4)),
    BadCall("RollingKVCache(window=2, batch=1, n_kv_heads=2, head_dim=4).append(k_t [1, 3, 4], "
            "v_t [1, 3, 4])", "3 kv heads in a cache of 2",
            lambda impl: _cache(impl).append(_z(1, 3, 4), _z(1, 3, 4))),
    BadCall("RollingKVCache(2, 1, 2, 4).append(k_t [1, 2, 4], v_t [1, 2, 5])",
            "v_t of another head_dim", lambda impl: _cache(impl).append(_z(1, 2, 4), _z(1, 2, 5))),
    BadCall("RollingKVCache(2, 1, 2, 4).append(k_t [2, 4], v_t [2, 4])", "no batch dimension",
            lambda impl: _cache(impl).append(_z(2, 4), _z(2, 4))),
    BadCall("sliding_window_decode_step(q_t [1, 2, 3], k_t [1, 2, 3], v_t [1, 2, 3], cache)",
            "an odd head dim (RoPE rotates pairs)",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 2, 3), _z(1, 2, 3), _z(1, 2, 3), impl.RollingKVCache(2, 1, 2, 3))),
    BadCall("sliding_window_decode_step(q_t [1, 3, 4], k_t [1, 2, 4], v_t [1, 2, 4], cache)",
            "kv heads that do not divide the query heads",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 3, 4), _z(1, 2, 4), _z(1, 2, 4), _cache(impl))),
    BadCall("sliding_window_decode_step(q_t [1, 2, 4], k_t [1, 2, 6], v_t [1, 2, 4], cache)",
            "k_t's head dim differs from q_t's",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 2, 4), _z(1, 2, 6), _z(1, 2, 4), _cache(impl))),
    BadCall("sliding_window_decode_step(q_t [1, 2, 4], k_t [1, 2, 4], v_t [1, 1, 4], cache)",
            "v_t with fewer heads than the cache",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 2, 4), _z(1, 2, 4), _z(1, 1, 4), _cache(impl))),
    BadCall("sliding_window_decode_step(q_t float16, k_t float32, v_t float32, cache)",
            "q_t, k_t and v_t of different dtypes",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 2, 4, dtype=torch.float16), _z(1, 2, 4), _z(1, 2, 4), _cache(impl))),
    BadCall("sliding_window_decode_step(q_t [1, 0, 4], k_t [1, 2, 4], v_t [1, 2, 4], cache)",
            "a q_t with no heads",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 0, 4), _z(1, 2, 4), _z(1, 2, 4), _cache(impl))),
    BadCall("sliding_window_decode_step(q_t [1, 2, 4], k_t [1, 0, 4], v_t [1, 0, 4], cache)",
            "a k_t with no heads",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 2, 4), _z(1, 0, 4), _z(1, 0, 4), _cache(impl))),
    BadCall("sliding_window_decode_step(q_t [1, 2, 0], k_t [1, 2, 0], v_t [1, 2, 0], cache)",
            "a head dim of 0",
            lambda impl: impl.sliding_window_decode_step(
                _z(1, 2, 0), _z(1, 2, 0), _z(1, 2, 0), _cache(impl))),
    BadCall("sliding_window_decode_step(q_t [2, 2, 4], k_t [1, 2, 4], v_t [1, 2, 4], cache)",
            "q_t of another batch than k_t",
            lambda impl: impl.sliding_window_decode_step(
                _z(2, 2, 4), _z(1, 2, 4), _z(1, 2, 4), _cache(impl))),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    "window 0": "window",
    "a negative window": "window",
    "batch 0": "batch",
    "no kv heads": "n_kv_heads",
    "head_dim 0": "head_dim",
    "a window that is no int": "window",
    "3 kv heads in a cache of 2": "k_t",
    "v_t of another head_dim": "v_t",
    "no batch dimension": "k_t|v_t",
    "an odd head dim (RoPE rotates pairs)": "q_t|k_t|D",
    "kv heads that do not divide the query heads": "k_t|q_t",
    "k_t's head dim differs from q_t's": "k_t",
    "v_t with fewer heads than the cache": "v_t",
    "q_t, k_t and v_t of different dtypes": "q_t|k_t|v_t",
    "a q_t with no heads": "q_t",
    "a k_t with no heads": "k_t|v_t",
    "a head dim of 0": "q_t|k_t|v_t|D",
    "q_t of another batch than k_t": "q_t|k_t",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_decoding_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


@given(case=decode_cases())
def test_rolling_cache_memory_stops_growing_at_the_window(impl, case):
    B, H, Hkv, D, window, _, dtype, seed = case
    steps = 3 * window + 1
    q = randn((B, H, steps, D), seed=seed, dtype=dtype)
    k, v = (randn((B, Hkv, steps, D), seed=seed + s, dtype=dtype) for s in (1, 2))
    cache = impl.RollingKVCache(window, B, Hkv, D, dtype=dtype)
    held = []
    for t in range(steps):
        impl.sliding_window_decode_step(q[:, :, t], k[:, :, t], v[:, :, t], cache)
        held.append(held_bytes(cache))
    limit = 2 * B * Hkv * window * D * dtype.itemsize
    assert max(held) <= limit, (
        f"the cache held {max(held)} bytes; its window of keys and values is {limit} "
        f"(2 x B={B} x Hkv={Hkv} x window={window} x D={D} x {dtype.itemsize} B). Keep kv heads "
        "unexpanded and overwrite the oldest slot instead of growing."
    )
    assert held[window - 1] == held[-1], (
        f"the cache held {held[window - 1]} bytes after {window} steps and {held[-1]} after "
        f"{steps}: it must stop growing once the window is full"
    )


# ----------------------------------------------------------------------------------------------
# Decoding


def test_decoding_rope_position_keeps_counting(impl):
    # Window 2, 5 steps: the buffer wraps twice; step 4 must see positions 3 and 4 only.
    q, k, v = (randn((1, 1, 5, 4), seed=s) for s in range(3))
    out, cache = decode(impl, q, k, v, 2, torch.float32)
    assert cache.seq_len == 5, (
        f"seq_len counts every token appended: expected 5, got {cache.seq_len}"
    )
    expected = decode_oracle(q, k, v, 2, torch.float32)
    assert_close(out[:, :, 4], expected[:, :, 4], hint="RoPE positions are absolute, not slots")


@given(case=decode_cases(), rope_base=st.sampled_from([10000.0, 500.0]),
       sm_scale=st.sampled_from([None, 0.0, 0.7]))  # fmt: skip
@example(case=(1, 2, 1, 8, 3, 7, torch.float32, 0), rope_base=500.0, sm_scale=None)
@example(case=(2, 2, 2, 8, 2, 5, torch.float32, 1), rope_base=10000.0, sm_scale=0.0)
def test_decoding_equals_sliding_window_attention(impl, case, rope_base, sm_scale):
    B, H, Hkv, D, window, steps, dtype, seed = case
    q = randn((B, H, steps, D), seed=seed, dtype=dtype)
    k = randn((B, Hkv, steps, D), seed=seed + 1, dtype=dtype)
    v = randn((B, Hkv, steps, D), seed=seed + 2, dtype=dtype)
    out, _ = decode(impl, q, k, v, window, dtype, rope_base=rope_base, sm_scale=sm_scale)
    assert out.dtype == dtype, f"got {out.dtype} for {dtype} inputs; outputs have q_t's dtype"
    assert_close(
        out,
        decode_oracle(q, k, v, window, dtype, rope_base=rope_base, sm_scale=sm_scale),
        hint="rotate q_t and k_t at the absolute position cache.seq_len (it keeps counting after "
        "the ring wraps) with angles p · rope_base^(-2i/D), store the rotated key, attend over the "
        "slots that hold a key, and scale by sm_scale when given (0.0 included).",
    )


@given(case=decode_cases(), other_seed=seeds())
@example(case=(1, 2, 1, 8, 3, 7, torch.float32, 0), other_seed=1)
def test_decoding_streams_stay_apart(impl, case, other_seed):
    """Each cache is one stream: two of the same shape decoded in turn, then a third started
    after them, each attend over their own tokens only."""
    B, H, Hkv, D, window, steps, dtype, seed = case

    def stream(s):  # (q, k, v) of one stream
        q = randn((B, H, steps, D), seed=s, dtype=dtype)
        return q, *(randn((B, Hkv, steps, D), seed=s + i, dtype=dtype) for i in (1, 2))

    streams = [stream(seed), stream(other_seed)]
    caches = [impl.RollingKVCache(window, B, Hkv, D, dtype=dtype) for _ in streams]
    outs = [[], []]
    for t in range(steps):
        for i, (q, k, v) in enumerate(streams):
            step = impl.sliding_window_decode_step(q[:, :, t], k[:, :, t], v[:, :, t], caches[i])
            outs[i].append(step)
    apart = (
        "each step reads and writes only the cache it is given: keep nothing between calls "
        "outside it (a module-level list of past keys, say), or streams decoded in turn, or one "
        "started after another, see each other's tokens"
    )
    for i, (q, k, v) in enumerate(streams):
        assert_close(
            torch.stack(outs[i], dim=2),
            decode_oracle(q, k, v, window, dtype),
            name=f"stream {i} of two decoded in turn",
            hint=apart,
        )
    q, k, v = stream(seed + 3)
    out, _ = decode(impl, q, k, v, window, dtype)
    assert_close(
        out, decode_oracle(q, k, v, window, dtype), name="a stream started after two", hint=apart
    )


def test_decoding_reads_strided_inputs(impl):
    q, k, v = (randn((2, 2, 6, 8), seed=s) for s in range(3))
    views = [strided_like_a_model(t, pad) for t, pad in zip((q, k, v), (0, 2, 5), strict=True)]
    out, _ = decode(impl, *views, 3, torch.float32)
    assert_close(
        out,
        decode_oracle(q, k, v, 3, torch.float32),
        hint="q_t, k_t and v_t here are slices of transposed views with different strides",
    )


def test_decoding_survives_scores_in_the_thousands(impl):
    gen = torch.Generator().manual_seed(0)
    q = torch.randint(-8, 9, (1, 2, 12, 8), generator=gen) * 16.0
    k = torch.randint(-8, 9, (1, 1, 12, 8), generator=gen).float()
    v = randn((1, 1, 12, 8), seed=1)
    out, _ = decode(impl, q, k, v, 4, torch.float32)
    assert_close(
        out,
        decode_oracle(q, k, v, 4, torch.float32),
        hint="scores here reach thousands: exp(score) overflows to inf and inf / inf is NaN. "
        "Subtract the maximum score before exp().",
    )


def test_decoding_thousands_of_steps_keeps_positions_exact(impl):
    steps, window, last = 3000, 4, 6
    q, k, v = (randn((1, 1, steps, 8), seed=s) for s in range(3))
    out, cache = decode(impl, q, k, v, window, torch.float32)
    assert cache.seq_len == steps
    positions = torch.arange(steps)[:, None]
    inv_freq = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angles = (positions * inv_freq).repeat(1, 2)  # (steps, 8), float64
    cos, sin = angles.cos(), angles.sin()

    def rotate(x):  # x (1, 1, N, 8) to positions 0 .. N - 1, in float64
        x = x.double()
        return x * cos + torch.cat([-x[..., 4:], x[..., :4]], dim=-1) * sin

    expected = attention_oracle(
        rotate(q)[:, :, -last:], rotate(k).float(), v, causal=True,
        mask=band_mask(last, steps, window),
    )  # fmt: skip
    assert_close(
        out[:, :, -last:],
        expected,
        hint=f"after {steps} steps the angles p · rope_base^(-2i/D) are in the thousands of "
        "radians: a float32 product p · inv_freq is off by 1e-4 there. Form the angles in float64 "
        "(or from an exact integer position) before taking cos and sin.",
    )


def test_decoding_float64_inputs_give_float64_outputs(impl):
    q, k, v = (randn((1, 2, 7, 4), seed=s, dtype=torch.float64) for s in range(3))
    out, _ = decode(impl, q, k, v, 3, torch.float64)
    assert out.dtype == torch.float64, (
        f"got {out.dtype} for float64 inputs: outputs have q_t's dtype, float64 included "
        "(compute in float32 or float64, then cast the output to q_t.dtype)"
    )
    assert_close(
        out,
        decode_oracle(q, k, v, 3, torch.float64),
        dtype=torch.float32,  # float64 inputs may be computed in float32
        hint="float64 inputs: the same decoding, checked at float32's tolerance",
    )


def test_decoding_more_than_64_caches_in_turn(impl):
    """66 caches of one shape decode 2 steps each, a step of every cache in turn."""
    n, steps, window = 66, 2, 2
    streams = [[randn((1, 2, steps, 2), seed=3 * i + s) for s in range(3)] for i in range(n)]
    caches = [impl.RollingKVCache(window, 1, 2, 2) for _ in range(n)]
    outs = [[] for _ in range(n)]
    for t in range(steps):
        for i, (q, k, v) in enumerate(streams):
            outs[i].append(
                impl.sliding_window_decode_step(q[:, :, t], k[:, :, t], v[:, :, t], caches[i])
            )
    for i, (q, k, v) in enumerate(streams):
        assert_close(
            torch.stack(outs[i], dim=2),
            decode_oracle(q, k, v, window, torch.float32),
            name=f"cache {i} of {n} decoded in turn",
            hint="every cache holds its own buffers, however many are alive: buffers taken from "
            "a pool shared between caches (of any size) make two caches write the same memory",
        )


def fast_forward(cache, n: int) -> None:
    """Append n tokens of zeros [1, 1, 2] to `cache` quickly: without the harness's checks,
    which cost about a millisecond a call (the calls this test checks run under the harness)."""
    append = type(cache).append
    guard = getattr(append, "__guard__", None)
    call = append if guard is None else functools.partial(guard.unobserved, append)
    for _ in range(n):
        call(cache, torch.zeros(1, 1, 2), torch.zeros(1, 1, 2))


def test_decoding_past_32767_tokens_keeps_counting(impl):
    # 32764 tokens appended quickly, then 10 decoded as usual: positions 32764 .. 32773 run past
    # 32767, the largest int16, and the last 7 steps see only decoded tokens (window 4).
    window, start, steps = 4, 32764, 10
    cache = impl.RollingKVCache(window, 1, 1, 2)
    fast_forward(cache, start)
    assert cache.seq_len == start, f"after {start} appends seq_len is {cache.seq_len}"
    q, k, v = (randn((1, 2 if s == 0 else 1, steps, 2), seed=s) for s in range(3))
    out = torch.stack(
        [
            impl.sliding_window_decode_step(q[:, :, t], k[:, :, t], v[:, :, t], cache)
            for t in range(steps)
        ],
        dim=2,
    )
    assert cache.seq_len == start + steps, (
        f"after {start + steps} tokens seq_len is {cache.seq_len}: the count runs past 32767 "
        "(keep it a Python int, or int64), and it is also the RoPE position of the next token"
    )
    positions = torch.arange(start, start + steps, dtype=torch.float64)[:, None]
    angles = (positions * 10000.0 ** (-torch.arange(0, 2, 2, dtype=torch.float64) / 2)).repeat(1, 2)

    def rotate(x):  # x (1, h, steps, 2) to positions start .. start + steps - 1, in float64
        x = x.double()
        return x * angles.cos() + torch.cat([-x[..., 1:], x[..., :1]], dim=-1) * angles.sin()

    expected = attention_oracle(
        rotate(q), rotate(k).float(), v, causal=True, mask=band_mask(steps, steps, window)
    )
    assert_close(
        out[:, :, window - 1 :],
        expected[:, :, window - 1 :],
        hint=f"positions {start + window - 1} .. {start + steps - 1}: RoPE rotates to the "
        "absolute position cache.seq_len, which must keep counting past 32767 (a counter kept "
        "in int16 wraps around to -32768 there).",
    )
