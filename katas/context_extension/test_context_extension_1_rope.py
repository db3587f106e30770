"""Level 1 of the context-extension kata: RoPE's frequencies, tables and rotation.

Order: bad input and known values first (cheap, and they catch the wrong-but-plausible variants
that still satisfy every property), then precision at far positions, the cost of apply_rope,
the properties and the float64 oracles on drawn shapes.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.devices import float_dtypes
from grading.judge.cost import count_flops, count_multiplies, largest_tensor, measure
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.guards import caller_changes
from grading.judge.strategies import lengths, randn, seeds
from grading.judge.tolerance import assert_close
from katas.context_extension.cases import (
    FAR_POSITIONS,
    bases,
    cos_sin_oracle,
    far_positions,
    head_dims,
    inv_freq_oracle,
    rotate_pairs_oracle,
    tables,
)

F32 = torch.float32
ALL_FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
POSITION_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, *ALL_FLOATS]
PRECISION = (
    "a precision problem: form the angles positions * inv_freq in float64 and round cos/sin to "
    "float32 only at the end; float32 (or float16, bfloat16) positions or angles lose the last "
    "digits of far positions"
)


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The bytes of a's storage and b's storage overlap (a view of b, or b itself)."""
    sa, sb = a.untyped_storage(), b.untyped_storage()
    if not sa.nbytes() or not sb.nbytes():
        return False
    return (
        sa.data_ptr() < sb.data_ptr() + sb.nbytes() and sb.data_ptr() < sa.data_ptr() + sa.nbytes()
    )


# ----------------------------------------------------------------------------------------------
# Bad input


def _bad_calls() -> list[BadCall]:
    inv_freq, cos, sin = torch.tensor([1.0, 0.1]), torch.ones(5, 4), torch.zeros(5, 4)
    x = torch.zeros(2, 5, 4)
    return [
        BadCall("rope_inv_freq(7)", "odd head_dim", lambda m: m.rope_inv_freq(7)),
        BadCall("rope_inv_freq(0)", "head_dim 0", lambda m: m.rope_inv_freq(0)),
        BadCall("rope_inv_freq(-4)", "negative head_dim", lambda m: m.rope_inv_freq(-4)),
        BadCall("rope_inv_freq(8.0)", "float head_dim", lambda m: m.rope_inv_freq(8.0)),
        BadCall("rope_inv_freq(8, 1.0)", "base 1", lambda m: m.rope_inv_freq(8, 1.0)),
        BadCall("rope_inv_freq(8, 0.5)", "base below 1", lambda m: m.rope_inv_freq(8, 0.5)),
        BadCall("rope_inv_freq(8, -10000.0)", "negative base", lambda m: m.rope_inv_freq(8, -1e4)),
        BadCall("rope_inv_freq(8, nan)", "base NaN", lambda m: m.rope_inv_freq(8, math.nan)),
        BadCall("rope_inv_freq(8, inf)", "base inf", lambda m: m.rope_inv_freq(8, math.inf)),
        BadCall(
            "rope_cos_sin(positions of shape [2, 3], inv_freq)",
            "positions not 1-D",
            lambda m: m.rope_cos_sin(torch.zeros(2, 3), inv_freq),
        ),
        BadCall(
            "rope_cos_sin(positions of shape [], inv_freq)",
            "positions 0-D",
            lambda m: m.rope_cos_sin(torch.tensor(5), inv_freq),
        ),
        BadCall(
            "rope_cos_sin(positions, inv_freq of shape [1, 2])",
            "inv_freq not 1-D",
            lambda m: m.rope_cos_sin(torch.arange(3), inv_freq[None]),
        ),
        BadCall(
            "apply_rope(x of shape [2, 6, 4], cos [5, 4], sin [5, 4])",
            "N differs from the tables",
            lambda m: m.apply_rope(torch.zeros(2, 6, 4), cos, sin),
        ),
        BadCall(
            "apply_rope(x of shape [2, 5, 6], cos [5, 4], sin [5, 4])",
            "D differs from the tables",
            lambda m: m.apply_rope(torch.zeros(2, 5, 6), cos, sin),
        ),
        BadCall(
            "apply_rope(x, cos [5, 4], sin [4, 4])",
            "sin for other positions",
            lambda m: m.apply_rope(x, cos, torch.zeros(4, 4)),
        ),
        BadCall(
            "apply_rope(x of shape [2, 5, 4], cos [1, 4], sin [1, 4])",
            "tables of one position",  # not broadcast over the positions
            lambda m: m.apply_rope(x, cos[:1], sin[:1]),
        ),
        BadCall(
            "apply_rope(x, cos [1, 5, 4], sin [1, 5, 4])",
            "tables not [N, D]",
            lambda m: m.apply_rope(x, cos[None], sin[None]),
        ),
        BadCall(
            "apply_rope(x of shape [5, 3], cos [5, 3], sin [5, 3])",
            "odd head_dim",
            lambda m: m.apply_rope(torch.zeros(5, 3), torch.ones(5, 3), torch.zeros(5, 3)),
        ),
        BadCall(
            "apply_rope(x of shape [4], cos [1, 4], sin [1, 4])",
            "x without a position dimension",
            lambda m: m.apply_rope(torch.zeros(4), cos[:1], sin[:1]),
        ),
        BadCall(
            "apply_rope(x of dtype int64, cos, sin)",
            "integer x",
            lambda m: m.apply_rope(torch.zeros(2, 5, 4, dtype=torch.int64), cos, sin),
        ),
    ]


# What each ValueError's message must name.
NAMES = {
    "odd head_dim": "head_dim|x",
    "head_dim 0": "head_dim",
    "negative head_dim": "head_dim",
    "float head_dim": "head_dim",
    "base 1": "base",
    "base below 1": "base",
    "negative base": "base",
    "base NaN": "base",
    "base inf": "base",
    "positions not 1-D": "positions",
    "positions 0-D": "positions",
    "inv_freq not 1-D": "inv_freq",
    "N differs from the tables": "x|cos|sin",
    "D differs from the tables": "x|cos|sin",
    "sin for other positions": "sin",
    "tables not [N, D]": "cos|sin",
    "tables of one position": "cos|sin|x",
    "x without a position dimension": "x",
    "integer x": "x",
}


@pytest.mark.parametrize("bad", _bad_calls(), ids=str)
def test_bad_rope_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


# ----------------------------------------------------------------------------------------------
# Known values, derived by hand


def test_rope_inv_freq_known_values(impl):
    # 10000 ** (-2i/8) = 10 ** (-i): one decade per pair.
    got = impl.rope_inv_freq(8, 10000.0)
    assert got.dtype == F32, f"rope_inv_freq must return float32, got {got.dtype}"
    expected = torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64)
    assert_close(
        got,
        expected,
        hint="inv_freq[i] = base ** (-2i / head_dim): the exponent is 2i, not i, and there are "
        "head_dim / 2 of them",
    )
    assert_close(impl.rope_inv_freq(4, 100.0), torch.tensor([1.0, 0.1], dtype=torch.float64))
    assert_close(impl.rope_inv_freq(8), expected, hint="the default base is 10000")
    assert_close(
        impl.rope_inv_freq(4, base=500000.0),
        torch.tensor([1.0, 500000.0**-0.5], dtype=torch.float64),
        hint="base is the second argument: use it, not the default 10000",
    )


def test_rope_cos_sin_layout_known_values(impl):
    positions = torch.tensor([0.0, 1.0, 2.5])
    cos, sin = impl.rope_cos_sin(positions, torch.tensor([1.0, 0.1]))
    assert cos.dtype == F32 and sin.dtype == F32, f"tables must be float32, got {cos.dtype}"
    angles = [[0.0, 0.0], [1.0, 0.1], [2.5, 0.25]]
    expected_cos = torch.tensor(
        [[math.cos(a), math.cos(b)] * 2 for a, b in angles], dtype=torch.float64
    )
    expected_sin = torch.tensor(
        [[math.sin(a), math.sin(b)] * 2 for a, b in angles], dtype=torch.float64
    )
    hint = (
        "row n is cat([f, f]) with f = positions[n] * inv_freq: the half-split layout of "
        "Llama, not the interleaved (f0, f0, f1, f1) one; fractional positions stay fractional"
    )
    assert_close(cos, expected_cos, name="cos", hint=hint)
    assert_close(sin, expected_sin, name="sin", hint=hint)


def test_apply_rope_known_values_at_position_1(impl):
    # head_dim 4, base 100: pairs (x0, x2) turn by 1 radian and (x1, x3) by 0.1 radian.
    c1, s1, c2, s2 = math.cos(1.0), math.sin(1.0), math.cos(0.1), math.sin(0.1)
    cos = torch.tensor([[c1, c2, c1, c2]])
    sin = torch.tensor([[s1, s2, s1, s2]])
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    expected = torch.tensor(
        [[-1.9841106485555495, 1.590674663968739, 2.4623779024123156, 4.17968349440576]],
        dtype=torch.float64,
    )  # (1·c1 - 3·s1, 2·c2 - 4·s2, 3·c1 + 1·s1, 4·c2 + 2·s2)
    assert_close(
        impl.apply_rope(x, cos, sin),
        expected,
        hint="x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x2, x1): dimension i "
        "pairs with i + D/2 (not i + 1), and the minus sign goes on the second half",
    )
    half = impl.apply_rope(x.half(), cos, sin)
    assert half.dtype == torch.float16, (
        f"apply_rope must return x's dtype: float16 in, {half.dtype} out. Multiplying by the "
        "float32 tables promotes to float32; cast the result back"
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_apply_rope_computes_in_float32(impl, dtype):
    # Pairs (1, 1) turned by angles near pi/4: a·cos - b·sin nearly cancels. In float32 the
    # difference is exact and rounds once to `dtype`; with the tables rounded to `dtype` first
    # (or the products rounded there), the rounding errors of cos and sin are all that is left.
    theta = math.pi / 4 + torch.linspace(-0.01, 0.01, 9, dtype=torch.float64)  # (9,)
    cos = torch.stack([theta.cos(), theta.cos()], dim=-1).float()  # (9, 2)
    sin = torch.stack([theta.sin(), theta.sin()], dim=-1).float()
    x = torch.ones(9, 2, dtype=dtype)
    out = impl.apply_rope(x, cos, sin)
    assert out.dtype == dtype, f"apply_rope must return x's dtype {dtype}, got {out.dtype}"
    expected = rotate_pairs_oracle(x, cos, sin)  # (9, 2)
    assert_close(
        out[:, 0],
        expected[:, 0],
        name="a·cos - b·sin where the two nearly cancel",
        hint=f"a precision problem: upcast x ({dtype}) to float32, multiply by the float32 "
        f"tables as they are (do not cast cos and sin to {dtype}), and cast only the result back",
    )


# ----------------------------------------------------------------------------------------------
# Far positions: precision where long contexts and decoding steps live


@pytest.mark.parametrize("dtype", POSITION_DTYPES, ids=str)
def test_far_positions_keep_float32_accuracy(impl, dtype):
    positions = far_positions(dtype)
    inv_freq = impl.rope_inv_freq(128, 500000.0)
    cos, sin = impl.rope_cos_sin(positions, inv_freq)
    expected_cos, expected_sin = cos_sin_oracle(positions, inv_freq)
    name = f"({dtype} positions {positions.tolist()})"
    assert_close(cos, expected_cos, name=f"cos {name}", hint=PRECISION)
    assert_close(sin, expected_sin, name=f"sin {name}", hint=PRECISION)


@pytest.mark.parametrize("position", FAR_POSITIONS[3:], ids=lambda p: f"position {p}")
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float64], ids=str)
def test_one_decoding_step_far_out(impl, position, dtype):
    # A decoding step asks for the table of one position: [1, D].
    positions = torch.tensor([position], dtype=dtype)
    for inv_freq in (impl.rope_inv_freq(64, 10000.0), inv_freq_oracle(16, 1e6)):
        cos, sin = impl.rope_cos_sin(positions, inv_freq)
        expected_cos, expected_sin = cos_sin_oracle(positions, inv_freq)
        where = f"(position {position} as {dtype}, {inv_freq.dtype} inv_freq)"
        hint = f"{PRECISION}; inv_freq is used as given (float64 frequencies stay float64)"
        assert_close(cos, expected_cos, name=f"cos {where}", hint=hint)
        assert_close(sin, expected_sin, name=f"sin {where}", hint=hint)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float32, torch.float64], ids=str)
def test_near_positions_keep_float32_accuracy(impl, dtype):
    """The angles are formed in float64 at every position, near ones too: each table entry is the
    float64 cos/sin rounded to float32 once, within a few float32 steps of the float64 oracle."""
    positions = torch.arange(256).to(dtype)  # 0 .. 255, exact in every dtype here
    bound = 4 * 2.0**-24  # 4 float32 steps of values in [0.5, 1): rounding once costs at most 1/2
    for inv_freq in (impl.rope_inv_freq(4, 3.7), impl.rope_inv_freq(6, 1.37)):
        got = impl.rope_cos_sin(positions, inv_freq)
        want = cos_sin_oracle(positions, inv_freq)
        for name, table, expected in zip(("cos", "sin"), got, want, strict=True):
            error = (table.double() - expected).abs().max().item()
            assert error <= bound, (
                f"{name} of positions 0 .. 255 ({dtype}, inv_freq {inv_freq.tolist()}) is off by "
                f"up to {error:.3g} from the float64 oracle; the bound is {bound:.3g} (4 float32 "
                "steps). The README: the angles positions[n] * inv_freq[i] are 'formed in "
                "**float64** from the values exactly as given ... and rounded to float32 only at "
                "the end'. A float32 angle (a fast path for short positions, say) is off by up "
                "to half a float32 step of the angle itself, some hundred steps of cos and sin"
            )


def _float32_steps(got: torch.Tensor, expected: torch.Tensor, floor: float = 0.0) -> float:
    """The largest error of float32 `got` in float32 steps (spacings) of the float64 values."""
    spacing = (
        torch.nextafter(expected.float().abs(), torch.tensor(math.inf)) - expected.float().abs()
    )
    return ((got.double() - expected).abs() / (spacing.double() + floor)).max().item()


@pytest.mark.parametrize(("d", "base"), [(4, 3.7), (6, 1.37), (64, 1e4), (64, 1e12), (8, 1.0001)])
def test_near_positions_round_each_entry_once(impl, d, base):
    """cos and sin of the float64 angles, rounded once: within one float32 step of each value,
    also where cos or sin is near 0 and a float32 step is tiny."""
    positions = torch.arange(256)
    inv_freq = torch.tensor(inv_freq_oracle(d, base).tolist(), dtype=F32)
    got = impl.rope_cos_sin(positions, inv_freq)
    want = cos_sin_oracle(positions, inv_freq)
    for name, table, expected in zip(("cos", "sin"), got, want, strict=True):
        steps = _float32_steps(table, expected, floor=2.0**-30)
        assert steps <= 1.0, (
            f"{name} of positions 0 .. 255 (D {d}, base {base}) is up to {steps:.3g} float32 "
            "steps of the value off the float64 oracle; rounding the float64 cos or sin once "
            "costs at most 1/2. Take cos and sin of the float64 angles in float64 and round to "
            "float32 only at the end: cos and sin taken in float32 (even of angles reduced mod "
            "2 pi in float64) are off by many steps where the value is near 0"
        )


@given(d=head_dims, base=st.one_of(bases, st.sampled_from([1e12, 1e9, 5e5])))
@example(d=96, base=1e12)
@example(d=128, base=500000.0)
def test_rope_inv_freq_is_the_float64_value_rounded_once(impl, d, base):
    got = impl.rope_inv_freq(d, base)
    steps = _float32_steps(got, inv_freq_oracle(d, base))
    assert steps <= 1.0, (
        f"rope_inv_freq({d}, {base}) is up to {steps:.3g} float32 steps off base ** (-2i / D) "
        "in float64; rounding the float64 value once costs at most 1/2. Compute the power in "
        "float64 and round to float32 at the end: base ** (arange(0, D, 2).float() / D) in "
        "float32 is several steps off at large bases"
    )


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16], ids=str)
def test_rope_cos_sin_of_a_long_prompt(impl, dtype):
    # The tables of a 3000-token prompt in one call, a million tokens in where the dtype allows.
    start = 0 if dtype == torch.int16 else 1_000_000
    positions = torch.arange(start, start + 3000).to(dtype)
    inv_freq = impl.rope_inv_freq(64, 500000.0)
    cos, sin = impl.rope_cos_sin(positions, inv_freq)
    expected_cos, expected_sin = cos_sin_oracle(positions, inv_freq)
    where = f"({dtype} positions {start} .. {start + 2999})"
    assert_close(cos, expected_cos, name=f"cos {where}", hint=f"cat([f, f]) layout; {PRECISION}")
    assert_close(sin, expected_sin, name=f"sin {where}", hint=f"cat([f, f]) layout; {PRECISION}")


# ----------------------------------------------------------------------------------------------
# Cost: RoPE is elementwise work


@pytest.mark.parametrize(
    "shape",
    [(2, 3, 17, 64), (1, 1, 1, 128), (4, 8, 5, 2), (1, 2, 33, 256), (3, 9, 16)],
    ids=lambda s: "x " + "x".join(map(str, s)),
)
def test_apply_rope_is_elementwise(impl, shape):
    x = randn(shape, seed=0)
    cos, sin = tables(torch.arange(shape[-2]), shape[-1])
    _, flops = count_flops(impl.apply_rope, x, cos, sin)
    _, multiplies = count_multiplies(impl.apply_rope, x, cos, sin)
    _, record = largest_tensor(impl.apply_rope, x, cos, sin)
    assert flops == 0, (
        f"apply_rope spent {flops} matmul FLOPs: a rotation per pair is two multiplies and an add, "
        "not a (D, D) rotation matrix"
    )
    assert multiplies <= 3 * x.numel(), (
        f"apply_rope did {multiplies} multiplications for x of {x.numel()} elements; "
        "x * cos + rotate_half(x) * sin needs 2 per element (at most 3 allowed). A rotation "
        "matrix applied by broadcasting costs D per element"
    )
    assert record.numel <= 2 * x.numel(), (
        f"apply_rope made a tensor of {record}, more than twice x ({x.numel()} elements): "
        "work on the halves of x, elementwise"
    )


# ----------------------------------------------------------------------------------------------
# Properties


@given(d=head_dims, base=bases, n=st.integers(1, 9), scribble=st.sampled_from(["nan", "zero"]))
@example(d=8, base=10000.0, n=3, scribble="nan")
def test_tables_are_the_callers_own(impl, d, base, n, scribble):
    """The caller may change a table it got (scale inv_freq in place, say): a later call with the
    same arguments must still give the right values."""
    positions = torch.arange(n)
    for _ in range(2):  # the second round reads what the first round scribbled on, if kept
        inv_freq = impl.rope_inv_freq(d, base)
        cos, sin = impl.rope_cos_sin(positions, inv_freq)
        want_cos, want_sin = cos_sin_oracle(positions, inv_freq_oracle(d, base).float())
        assert_close(
            inv_freq,
            inv_freq_oracle(d, base),
            name="rope_inv_freq",
            hint="a second call gave other values after the caller changed the first call's "
            "tensor in place: return a new tensor on every call, not one kept between calls",
        )
        for name, got, want in (("cos", cos, want_cos), ("sin", sin, want_sin)):
            assert_close(
                got,
                want,
                name=name,
                hint="a second call gave other values after the caller changed the first call's "
                "tables in place: return new tensors on every call, not views of a kept table",
            )
        caller_changes(impl.rope_cos_sin, inv_freq, cos, sin)  # the caller's own tensors
        for t in (inv_freq, cos, sin):
            t.fill_(float("nan") if scribble == "nan" else 0.0)


@given(d=st.sampled_from([16, 64, 128]), n=st.integers(16, 64), base=bases, seed=seeds())
@example(d=128, n=64, base=500000.0, seed=0)
def test_rope_answers_follow_their_inputs(impl, d, n, base, seed):
    """Every call computes from the values it is given: called again on the very same tensors
    (at the cost of computing), on the same tensors changed in place, and on a new one-position
    tensor per decoding step."""
    gen = torch.Generator().manual_seed(seed)
    positions = torch.randint(1, 10**6, (n,), generator=gen)
    inv_freq = inv_freq_oracle(d, base).float()
    x = randn((2, n, d), seed=seed)
    # measure: again on fresh values, on those same tensors, then after changing them in place.
    (cos, sin), _ = measure(impl.rope_cos_sin, positions, inv_freq)
    measure(impl.apply_rope, x, cos, sin)
    memory = (
        "a memory of earlier calls keyed on the tensors (their id, data pointer or version) "
        "answers with stale numbers: compute from the values on every call"
    )
    for step in range(3):  # the same tensor objects, new values each time
        positions.copy_(torch.randint(1, 10**6, (n,), generator=gen))
        inv_freq.mul_(0.5)
        x.copy_(randn((2, n, d), seed=seed + step + 1))
        cos, sin = impl.rope_cos_sin(positions, inv_freq)
        expected_cos, expected_sin = cos_sin_oracle(positions, inv_freq)
        changed = f"after positions and inv_freq were changed in place ({step + 1}x)"
        assert_close(cos, expected_cos, name=f"cos {changed}", hint=memory)
        assert_close(sin, expected_sin, name=f"sin {changed}", hint=memory)
        cos, sin = expected_cos.float(), expected_sin.float()
        assert_close(
            impl.apply_rope(x, cos, sin),
            rotate_pairs_oracle(x, cos, sin),
            name=f"apply_rope after x, cos and sin were changed in place ({step + 1}x)",
            hint=memory,
        )
    # The same values in another order: a memory keyed on a summary of the values (their sum,
    # their sum of squares) cannot tell them apart, and answers with the earlier rows.
    shuffled = positions.flip(0)  # (n,): a new tensor, the rows in reverse order
    for table_name, got, want in zip(
        ("cos", "sin"),
        impl.rope_cos_sin(shuffled, inv_freq.clone()),
        cos_sin_oracle(shuffled, inv_freq),
        strict=True,
    ):
        assert_close(
            got,
            want,
            name=f"{table_name} for the same positions in another order",
            hint="the row for positions[n] must come from positions[n]; a memory keyed on a "
            "summary of the values (their sum, sum of squares) answers a reordering with the "
            "earlier call's rows: compute from the values on every call",
        )
    for step in range(4):  # decoding: a new [1] tensor per step, perhaps at a freed one's id
        position = torch.tensor([1000 * step + seed % 1000])
        cos, sin = impl.rope_cos_sin(position, inv_freq)
        expected_cos, _ = cos_sin_oracle(position, inv_freq)
        assert_close(
            cos,
            expected_cos,
            name=f"cos at decoding step {step} (position {int(position)})",
            hint=f"each step passes a new positions tensor, which Python may give the id of the "
            f"last one, freed; {memory}",
        )


@given(
    d=head_dims,
    base=bases,
    m=st.integers(0, 500),
    n=st.integers(0, 500),
    shift=st.integers(0, 500),
    seed=seeds(),
)
@example(d=128, base=500000.0, m=1_000_000, n=999_000, shift=2**30, seed=0)
@example(d=8, base=10000.0, m=3, n=5_000_000, shift=1_000_003, seed=1)
def test_rope_scores_depend_only_on_distance(impl, d, base, m, n, shift, seed):
    q, k = randn((d,), seed=seed), randn((d,), seed=seed + 1)
    positions = torch.tensor([m, n, m + shift, n + shift])
    cos, sin = impl.rope_cos_sin(positions, impl.rope_inv_freq(d, base))
    rotated = impl.apply_rope(torch.stack([q, k, q, k]), cos, sin).double()  # (4, d)
    before = rotated[0] @ rotated[1]
    after = rotated[2] @ rotated[3]
    assert_close(
        after.reshape(1),
        before.reshape(1),
        dtype=F32,
        scale=float(q.norm() * k.norm()),
        name="<R_m q, R_n k>",
        hint="shifting both positions must not change the score: the tables must pair cos and "
        f"sin of the same angle in both halves. At far positions this is also {PRECISION}",
    )


@given(
    d=head_dims,
    n=lengths(33),
    batch=st.integers(1, 3),
    dtype=st.sampled_from(float_dtypes()),
    seed=seeds(),
)
def test_rope_preserves_norms(impl, d, n, batch, dtype, seed):
    x = randn((batch, n, d), seed=seed, dtype=dtype)
    positions = torch.randint(0, 10_000, (n,), generator=torch.Generator().manual_seed(seed))
    cos, sin = impl.rope_cos_sin(positions, impl.rope_inv_freq(d))
    out = impl.apply_rope(x, cos, sin)
    assert_close(
        out.double().norm(dim=-1),
        x.double().norm(dim=-1),
        dtype=dtype,
        name="norms",
        hint="a rotation keeps every vector's length: cos and sin of one angle per pair",
    )


@given(d=head_dims, n=lengths(17), dtype=st.sampled_from(ALL_FLOATS), seed=seeds())
def test_position_zero_is_the_identity(impl, d, n, dtype, seed):
    x = randn((n, d), seed=seed, dtype=dtype)
    cos, sin = impl.rope_cos_sin(torch.zeros(n, dtype=torch.long), impl.rope_inv_freq(d))
    out = impl.apply_rope(x, cos, sin)
    assert out.dtype == dtype, f"apply_rope must keep x's dtype {dtype}, got {out.dtype}"
    assert_close(out, x.double(), hint="at position 0 every angle is 0: cos 1, sin 0")
    for name, given_tensor in (("x", x), ("cos", cos), ("sin", sin)):
        assert not _shares_memory(out, given_tensor), (
            f"apply_rope at position 0 returned a tensor sharing its memory with {name}: the "
            "README says every call returns new tensors, the caller's to change; a caller that "
            f"changes the result would change its {name}. Even when nothing turns, return a copy"
        )
    kept = x.clone()
    out.fill_(float("nan"))  # the caller's to change
    assert torch.equal(x, kept), "changing apply_rope's result changed its input x"
    assert_close(
        impl.apply_rope(x, cos, sin),
        x.double(),
        name="apply_rope called again after the caller changed the first result",
        hint="the first result must be a new tensor, not one the next call reads or returns",
    )


# ----------------------------------------------------------------------------------------------
# Float64 oracles on drawn shapes


@given(d=head_dims, base=bases)
@example(d=2, base=1.0001)
@example(d=256, base=1e12)
def test_rope_inv_freq_matches_oracle(impl, d, base):
    got = impl.rope_inv_freq(d, base)
    assert got.dtype == F32, f"rope_inv_freq must return float32, got {got.dtype}"
    assert_close(got, inv_freq_oracle(d, base), hint="base ** (-2i / head_dim), in float64")


@given(
    d=head_dims,
    base=bases,
    n=lengths(40),
    fractional=st.booleans(),
    far=st.booleans(),
    seed=seeds(),
)
@example(d=128, base=500000.0, n=1, fractional=False, far=True, seed=0)
@example(d=64, base=10000.0, n=3, fractional=True, far=True, seed=1)
def test_rope_cos_sin_matches_oracle(impl, d, base, n, fractional, far, seed):
    gen = torch.Generator().manual_seed(seed)
    positions = torch.randint(0, 10**7 if far else 100_000, (n,), generator=gen)
    if fractional:
        positions = positions / 3.0  # float positions, as interpolation makes them
    kept = positions.clone()
    inv_freq = impl.rope_inv_freq(d, base)
    cos, sin = impl.rope_cos_sin(positions, inv_freq)
    assert torch.equal(positions, kept), "rope_cos_sin modified its positions"
    expected_cos, expected_sin = cos_sin_oracle(positions, inv_freq)
    hint = f"cat([f, f]) layout; if only far positions fail, {PRECISION}"
    assert_close(cos, expected_cos, name="cos", hint=hint)
    assert_close(sin, expected_sin, name="sin", hint=hint)


@given(
    d=head_dims,
    heads=st.integers(1, 3),
    n=lengths(33),
    dtype=st.sampled_from(ALL_FLOATS),
    transposed=st.booleans(),
    seed=seeds(),
)
@example(d=64, heads=3, n=7, dtype=torch.float16, transposed=True, seed=0)
def test_apply_rope_matches_oracle(impl, d, heads, n, dtype, transposed, seed):
    if transposed:  # a [B, N, H, D] projection viewed as [B, H, N, D]: not contiguous
        x = randn((2, n, heads, d), seed=seed, dtype=dtype).transpose(1, 2)
    else:
        x = randn((2, heads, n, d), seed=seed, dtype=dtype)
    positions = torch.randint(0, 4096, (n,), generator=torch.Generator().manual_seed(seed))
    cos, sin = tables(positions, d)
    kept = (x.clone(), cos.clone(), sin.clone())
    out = impl.apply_rope(x, cos, sin)
    assert all(torch.equal(a, b) for a, b in zip((x, cos, sin), kept, strict=True)), (
        "apply_rope modified its input"
    )
    assert out.dtype == dtype, f"apply_rope must return x's dtype {dtype}, got {out.dtype}"
    assert_close(
        out,
        rotate_pairs_oracle(x, cos, sin),
        hint="pair (x[i], x[i + D/2]) turns to (a cos - b sin, a sin + b cos); compute in "
        "float32 (float64 for float64 x) and cast back to x's dtype at the end",
    )
