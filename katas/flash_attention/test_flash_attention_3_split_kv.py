"""Level 3: the log-sum-exp, merging partial results, and split-KV decoding."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.devices import default_device, float_dtypes
from grading.judge.attention import AttentionCase
from grading.judge.cost import count_flops
from grading.judge.errors import assert_value_error
from grading.judge.oracles import attention_oracle, log_sum_exp_oracle
from grading.judge.strategies import gqa_heads, lengths, randn, seeds
from grading.judge.tolerance import assert_close
from katas.flash_attention.cases import (
    INPUT_SCALES,
    LONG_NK,
    SM_SCALES,
    attention_cases,
    bad_attention_inputs,
    bad_call,
    bad_head_dims,
    check_attention,
    input_scales,
    resized,
    scores_far_below_zero,
    strided,
    wrong_decode_shapes,
)

DTYPES = float_dtypes(triton=True)


def assert_lse_close(actual, expected, *, hint: str) -> None:
    """lse is float32 with -inf exactly where a query sees no key."""
    __tracebackhide__ = True
    assert isinstance(actual, torch.Tensor), f"lse must be a tensor, got {type(actual).__name__}"
    assert actual.dtype == torch.float32, f"lse must be float32, got {actual.dtype}"
    assert tuple(actual.shape) == tuple(expected.shape), (
        f"lse must have shape {tuple(expected.shape)}, got {tuple(actual.shape)}"
    )
    actual = actual.detach().cpu()
    empty = torch.isneginf(expected)
    assert torch.equal(torch.isneginf(actual), empty), (
        f"lse must be -inf exactly for the queries that see no key (and finite elsewhere); {hint}"
    )
    assert_close(actual[~empty], expected[~empty], dtype=torch.float32, name="lse", hint=hint)


# ------------------------------------------------------------------------------------------------
# combine_partials
# ------------------------------------------------------------------------------------------------


@st.composite
def key_partitions(draw):
    """A decode-or-prefill case and cut points splitting its keys into consecutive parts."""
    H, Hkv = draw(gqa_heads(2, 2))
    Nq, Nk = draw(lengths(12)), draw(lengths(40, block=16))
    cuts = sorted(draw(st.lists(st.integers(0, Nk), min_size=0, max_size=4)))
    case = AttentionCase(
        B=1, H=H, Hkv=Hkv, Nq=Nq, Nk=Nk, D=16, causal=draw(st.booleans()),
        scale=draw(st.sampled_from(INPUT_SCALES)), seed=draw(seeds()),
    )  # fmt: skip
    return case, [0, *cuts, Nk]


def exact_parts(case: AttentionCase, cuts: list[int]):
    """float64 outs (S, B, H, Nq, D) and lses (S, B, H, Nq) over the keys [cuts[s], cuts[s+1])."""
    q, k, v = case.tensors(torch.device("cpu"))
    outs, lses = [], []
    for start, end in zip(cuts[:-1], cuts[1:], strict=True):
        part = torch.zeros(case.Nk, dtype=torch.bool)
        part[start:end] = True
        outs.append(attention_oracle(q, k, v, causal=case.causal, mask=part))
        lses.append(log_sum_exp_oracle(q, k, causal=case.causal, mask=part))
    return (q, k, v), torch.stack(outs), torch.stack(lses)


@given(partition=key_partitions())
@example(  # scores in the hundreds, an empty part, the first 12 - 30 + ... queries see all
    partition=(
        AttentionCase(B=1, H=2, Hkv=1, Nq=12, Nk=30, D=16, causal=True, scale=8.0, seed=1),
        [0, 5, 5, 30],
    )
)
@example(  # one part only: it passes through
    partition=(AttentionCase(B=1, H=1, Hkv=1, Nq=3, Nk=7, D=16, seed=2), [0, 7])
)
@example(  # causal with Nq > Nk: the first queries see no key in any part (zeros, lse -inf)
    partition=(
        AttentionCase(B=1, H=2, Hkv=2, Nq=12, Nk=5, D=16, causal=True, scale=3.0, seed=3),
        [0, 1, 2, 3, 4, 5],
    )
)  # fmt: skip
def test_combine_partials_merges_exact_parts(impl, partition):
    case, cuts = partition
    (q, k, v), outs, lses = exact_parts(case, cuts)
    out, lse = impl.combine_partials(outs.float(), lses.float())
    assert_lse_close(
        lse, log_sum_exp_oracle(q, k, causal=case.causal),
        hint="the merged lse is logsumexp over the parts' lse",
    )  # fmt: skip
    assert_close(
        out, attention_oracle(q, k, v, causal=case.causal), dtype=torch.float32,
        hint="weigh part s by exp(lse_s - max lse) and divide by the sum of the weights: "
        "without the max, exp overflows (scores here reach the hundreds); parts that saw no "
        "key (lse = -inf) weigh 0, and a query no part saw gets zeros",
    )  # fmt: skip
    assert out.dtype == torch.float32, f"combine_partials must return float32, got {out.dtype}"


def merged(outs: torch.Tensor, lses: torch.Tensor):
    """The merge in float64, of exactly the values given: (out, lse). A part with lse -inf
    weighs nothing, whatever its out holds."""
    outs, lses = outs.double().cpu(), lses.double().cpu()
    outs = outs.masked_fill(torch.isneginf(lses)[..., None], 0.0)
    lse = torch.logsumexp(lses, dim=0)  # (B, H, Nq)
    weights = torch.exp(lses - lse.masked_fill(torch.isneginf(lse), 0.0)).nan_to_num(0.0)
    return (weights[..., None] * outs).sum(dim=0), lse


@pytest.mark.parametrize("dtype", float_dtypes(), ids=str)
@pytest.mark.parametrize("S", [1, 7, 64])
def test_combine_partials_runs_in_float32_for_any_input_dtype(impl, dtype, S):
    # Many parts, their lse far apart (hundreds) and in `dtype`, as a low-precision kernel
    # might hand them over; the merge itself must still run in float32.
    outs = randn((S, 2, 3, 5, 16), seed=S, dtype=dtype, device=default_device())
    lses = randn((S, 2, 3, 5), seed=S + 1, scale=200.0, dtype=dtype, device=default_device())
    out, lse = impl.combine_partials(outs, lses)
    expected_out, expected_lse = merged(outs, lses)
    hint = (
        f"outs and lses arrive in {dtype}: convert them to float32 before weighing and summing "
        "(a precision failure otherwise), and subtract the largest lse before exp"
    )
    assert_lse_close(lse, expected_lse, hint=hint)
    assert out.dtype == torch.float32, f"combine_partials must return float32, got {out.dtype}"
    assert_close(out, expected_out, dtype=torch.float32, hint=hint)


# What the out of an empty part (lse -inf) may hold: zeros as the reference kernel writes them,
# or anything at all (NaN, infinities, large numbers), since such a part weighs nothing.
EMPTY_OUTS = [0.0, float("nan"), float("inf"), float("-inf"), 1e4]


@st.composite
def partials_with_empty_parts(draw):
    """(S, (B, H, Nq), dtype, share, scale, seed, filler) for `empty_parts`: S parts, `share`
    of them empty per query, lses of about `scale` in `dtype`, empty parts' outs `filler`."""
    S = draw(st.sampled_from([1, 2, 3, 4, 7, 64]))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(3, 8)))
    dtype = draw(st.sampled_from(float_dtypes()))
    share = draw(st.sampled_from([0.0, 0.3, 0.7, 1.0]))
    scale, seed = draw(st.sampled_from([1.0, 200.0])), draw(seeds())
    return S, shape, dtype, share, scale, seed, draw(st.sampled_from(EMPTY_OUTS))


def empty_parts(S, shape, dtype, share, scale, seed, filler=0.0):
    """outs (S, B, H, Nq, 16) and lses (S, B, H, Nq) in `dtype`, where a part that saw no key
    has lse -inf and output `filler` (0 as the reference kernel writes them; NaN or inf as
    another kernel may leave them). Query 0 no part saw, query 1 only the last part saw (every
    part before it is empty), query 2 only the first part saw; each other (part, query) is
    empty with probability `share`."""
    gen = torch.Generator().manual_seed(seed)
    empty = torch.rand((S, *shape), generator=gen) < share  # (S, B, H, Nq)
    empty[..., :3] = True
    empty[-1, ..., 1] = False
    empty[0, ..., 2] = False
    lses = torch.randn((S, *shape), generator=gen, dtype=torch.float64) * scale
    outs = torch.randn((S, *shape, 16), generator=gen, dtype=torch.float64)
    lses = lses.masked_fill(empty, float("-inf"))
    outs = outs.masked_fill(empty[..., None], filler)
    return (t.to(device=default_device(), dtype=dtype) for t in (outs, lses))


EMPTY_PARTS_HINT = (
    "a part that saw no key has lse = -inf and must weigh exactly 0: exp(-inf - (-inf)) is NaN "
    "wherever the largest lse is -inf too (a query no part saw, or one whose first parts are all "
    "empty when merging part by part), and so is 0 / 0. Shift by 0 where the max is -inf and "
    "divide by 1 where the weights sum to 0; a query no part saw gets zeros and lse -inf. "
    "An empty part's out may hold anything, NaN and inf included: 0 * NaN is NaN, so leave "
    "such parts out of the sum (torch.where or masked_fill) rather than multiplying them by 0"
)


def first_nan(got: torch.Tensor, queries: torch.Size) -> tuple[int, int, int] | None:
    """(b, h, query) of the first NaN in `got` ((B, H, Nq) or (B, H, Nq, D)), None if none."""
    if tuple(got.shape[:3]) != tuple(queries):
        return None  # a wrong shape: the comparisons below say so
    nan = torch.isnan(got.detach().cpu()).reshape(*queries, -1).any(dim=-1)
    return tuple(int(x) for x in torch.nonzero(nan)[0]) if nan.any() else None


@given(partials=partials_with_empty_parts())
@example(partials=(3, (1, 1, 3), torch.float32, 0.0, 1.0, 0, 0.0))  # the three queries only
@example(partials=(64, (2, 3, 8), torch.float16, 0.7, 200.0, 1, 0.0))  # many parts, mostly empty
@example(partials=(7, (1, 2, 5), torch.bfloat16, 1.0, 200.0, 2, 0.0))  # each query: <= 1 part
@example(partials=(4, (1, 2, 6), torch.float32, 0.3, 1.0, 3, float("nan")))  # empty outs NaN
@example(partials=(7, (2, 1, 5), torch.float16, 0.7, 200.0, 4, float("inf")))  # empty outs inf
def test_combine_partials_weighs_empty_parts_nothing(impl, partials):
    outs, lses = empty_parts(*partials)
    out, lse = impl.combine_partials(outs, lses)
    expected_out, expected_lse = merged(outs, lses)
    for name, got in (("output", out), ("lse", lse)):
        first = first_nan(got, expected_lse.shape)
        if first is not None:
            parts = [float(x) for x in lses[:8, first[0], first[1], first[2]]]
            raise AssertionError(
                f"NaN in the merged {name} at (b, h, query) = {first}, whose parts' lse are "
                f"{parts}{' ...' if lses.shape[0] > 8 else ''}: {EMPTY_PARTS_HINT}"
            )
    assert_lse_close(lse, expected_lse, hint=EMPTY_PARTS_HINT)
    assert out.dtype == torch.float32, f"combine_partials must return float32, got {out.dtype}"
    assert_close(out, expected_out, dtype=torch.float32, hint=EMPTY_PARTS_HINT)
    unseen = torch.isneginf(expected_lse)  # (B, H, Nq): no part saw the query
    assert (out.detach().cpu()[unseen] == 0).all(), "a query no part saw must get exact zeros"


def test_combine_partials_leaves_its_inputs_alone(impl):
    outs = randn((3, 1, 2, 4, 16), seed=0, device=default_device())
    lses = randn((3, 1, 2, 4), seed=1, scale=5.0, device=default_device())
    lses[1, 0, 0] = float("-inf")
    before = outs.clone(), lses.clone()
    impl.combine_partials(outs, lses)
    assert torch.equal(outs, before[0]), "combine_partials modified its input outs"
    assert torch.equal(lses, before[1]), "combine_partials modified its input lses"


def _bad_partials():
    outs = randn((3, 2, 4, 5, 16), seed=0, device=default_device())  # (S, B, H, Nq, D)
    lses = randn((3, 2, 4, 5), seed=1, device=default_device())  # (S, B, H, Nq)
    table = [
        ("outs without the part dim", r"outs", (outs[0], lses[0])),
        ("outs with a dim too many", r"outs", (outs[..., None], lses)),
        ("lses with a dim too many", r"lses", (outs, lses[..., None])),
        ("lses without the part dim", r"lses", (outs, lses[0])),
        ("lses of one value per query", r"lses", (outs, lses[0, 0, 0])),
        ("lses of one value", r"lses", (outs, lses[0, 0, 0, 0])),
        ("zero parts", r"outs|lses|part|\bS\b", (outs[:0], lses[:0])),
    ]
    # One size of lses, or of outs, differs from the other's: 1 (which broadcasting would
    # accept), one less or one more.
    for dim, size in enumerate(["S", "B", "H", "Nq"]):
        n = lses.shape[dim]
        for other in sorted({1, n - 1, n + 1}):
            why = f"{size}={other} in lses, {n} in outs"
            table.append((f"lses with {why}", r"lses", (outs, resized(lses, dim, other))))
            why = f"{size}={other} in outs, {n} in lses"
            table.append((f"outs with {why}", r"outs|lses", (resized(outs, dim, other), lses)))
    table.append(("lses of one value per part", r"lses", (outs, lses[:, :1, :1, :1])))
    return [(bad_call("combine_partials", args, why), names) for why, names, args in table]


BAD_PARTIALS = _bad_partials()


@pytest.mark.parametrize(("bad", "names"), BAD_PARTIALS, ids=[str(b) for b, _ in BAD_PARTIALS])
def test_combine_partials_refuses_bad_inputs(impl, bad, names):
    assert_value_error(bad, impl, match=names)


# ------------------------------------------------------------------------------------------------
# flash_attention_with_lse
# ------------------------------------------------------------------------------------------------

LSE_HINT = (
    "lse = m + ln(l), in the units of the scores: a kernel that works with exp2 must still take "
    "the natural log of l (or keep m in base 2 and convert the sum by ln 2)"
)


@given(case=attention_cases(max_len=40, block=16, head_dims=(16, 32), dtypes=DTYPES))
@example(  # scores in the hundreds, the first 13 queries see no key
    case=AttentionCase(
        B=1, H=2, Hkv=1, Nq=33, Nk=20, D=16, causal=True, dtype=torch.float16, scale=8.0, seed=0
    )
)
@example(  # sm_scale=0.0: every score is 0, lse = ln(number of visible keys)
    case=AttentionCase(B=1, H=2, Hkv=2, Nq=9, Nk=21, D=16, causal=True, sm_scale=0.0, seed=1)
)
@example(  # a negative sm_scale: used as given
    case=AttentionCase(B=1, H=2, Hkv=1, Nq=7, Nk=20, D=16, sm_scale=-1.0, seed=2)
)  # fmt: skip
def test_flash_attention_with_lse_returns_the_log_sum_exp(impl, case):
    q, k, v = case.tensors()
    out, lse = impl.flash_attention_with_lse(q, k, v, **case.options)
    assert_lse_close(lse, log_sum_exp_oracle(q, k, **case.options), hint=LSE_HINT)
    check_attention(out, q, k, v, **case.options, hint="the output must equal flash_attention's")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flash_attention_with_lse_over_long_and_extreme_scores(impl, dtype):
    far = AttentionCase(B=1, H=2, Hkv=1, Nq=18, Nk=37, D=16, causal=True, dtype=dtype, seed=5)
    long = AttentionCase(B=1, H=1, Hkv=1, Nq=16, Nk=LONG_NK, D=16, dtype=dtype, scale=0.3)
    for what, (q, k, v), causal in [
        ("every score about -200, strided", strided(*scores_far_below_zero(far)), True),
        (f"{LONG_NK} keys of near-equal weight", long.tensors(), False),
    ]:
        out, lse = impl.flash_attention_with_lse(q, k, v, causal=causal)
        hint = (
            f"with {what}: subtract the running max before exp2 and keep m and l in float32 "
            f"(a precision failure if only this fails); {LSE_HINT}"
        )
        assert_lse_close(lse, log_sum_exp_oracle(q, k, causal=causal), hint=hint)
        check_attention(out, q, k, v, causal=causal, sm_scale=None, hint=hint)


def test_lse_is_float32_on_the_default_device(impl):
    q, k, v = (randn((1, 1, 4, 16), seed=s, device=default_device()) for s in range(3))
    _, lse = impl.flash_attention_with_lse(q.half(), k.half(), v.half())
    assert lse.shape == (1, 1, 4) and lse.dtype == torch.float32, (
        "lse must be (B, H, Nq) float32 even for float16 inputs, "
        f"got {tuple(lse.shape)} {lse.dtype}"
    )
    assert lse.device == q.device, f"lse must be on q's device {q.device}, got {lse.device}"


@pytest.mark.parametrize(
    ("fn", "Nq", "Nk"),
    [("flash_attention_with_lse", 33, 40), ("split_kv_decode", 1, 200)],
    ids=["flash_attention_with_lse", "split_kv_decode"],
)
def test_level_3_leaves_no_attention_work_to_pytorch(impl, fn, Nq, Nk):
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=Nq, Nk=Nk, D=16, seed=9)
    q, k, v = case.tensors()
    _, flops = count_flops(getattr(impl, fn), q, k, v)
    attention = 4 * case.B * case.H * Nq * Nk * case.D
    assert flops < attention / 100, (
        f"{fn} ran {flops} FLOPs of PyTorch matrix products beside its kernel (the attention "
        f"itself is {attention}): scores, lse and partial results belong inside the kernel "
        "(lse = m + ln l from the kernel's own loop)"
    )


BAD_LSE_CALLS = [
    *bad_attention_inputs("flash_attention_with_lse"),
    *bad_head_dims("flash_attention_with_lse"),
]


@pytest.mark.parametrize(("bad", "names"), BAD_LSE_CALLS, ids=[str(b) for b, _ in BAD_LSE_CALLS])
def test_flash_attention_with_lse_refuses_bad_inputs(impl, bad, names):
    assert_value_error(bad, impl, match=names)


# ------------------------------------------------------------------------------------------------
# split_kv_decode
# ------------------------------------------------------------------------------------------------


@st.composite
def decode_cases(draw):
    H, Hkv = draw(gqa_heads(2, 2))
    Nk = draw(lengths(64, block=16))
    dtype = draw(st.sampled_from(DTYPES))
    case = AttentionCase(
        B=draw(st.integers(1, 2)), H=H, Hkv=Hkv, Nq=1, Nk=Nk, D=draw(st.sampled_from([16, 32])),
        sm_scale=draw(st.sampled_from(SM_SCALES)), dtype=dtype,
        scale=draw(st.sampled_from(input_scales(dtype, INPUT_SCALES))), seed=draw(seeds()),
    )  # fmt: skip
    splits = st.one_of(st.integers(1, 6), st.sampled_from([Nk, Nk + 1, 1000]))
    return case, draw(splits)


def split_hint(num_splits: int) -> str:
    return (
        f"with num_splits={num_splits}: each split must cover its own keys exactly once (the "
        "last one the remainder, a split past the end none), its partial result must be merged "
        "through its lse, and sm_scale=0.0 is a scale (not the default)"
    )


@given(decode=decode_cases())
@example(decode=(AttentionCase(B=1, H=4, Hkv=2, Nq=1, Nk=61, D=16, scale=0.5, seed=2), 4))
@example(decode=(AttentionCase(B=1, H=2, Hkv=1, Nq=1, Nk=37, D=16, seed=3), 1))
@example(decode=(AttentionCase(B=2, H=2, Hkv=2, Nq=1, Nk=5, D=32, seed=4), 5))  # a key each
@example(decode=(AttentionCase(B=1, H=2, Hkv=1, Nq=1, Nk=7, D=16, seed=5), 1000))  # > Nk
@example(  # sm_scale=0.0: the mean of all the values
    decode=(AttentionCase(B=1, H=2, Hkv=1, Nq=1, Nk=50, D=16, sm_scale=0.0, seed=6), 3)
)
@example(  # a negative sm_scale: used as given
    decode=(AttentionCase(B=1, H=2, Hkv=1, Nq=1, Nk=40, D=16, sm_scale=-0.3, seed=9), 2)
)
@example(  # scores in the hundreds
    decode=(
        AttentionCase(B=1, H=2, Hkv=2, Nq=1, Nk=64, D=16, dtype=torch.float16, scale=8.0, seed=7),
        3,
    )
)  # fmt: skip
def test_split_kv_decode_matches_oracle(impl, decode):
    case, num_splits = decode
    q, k, v = case.tensors()
    out = impl.split_kv_decode(q, k, v, sm_scale=case.sm_scale, num_splits=num_splits)
    check_attention(out, q, k, v, causal=False, sm_scale=case.sm_scale, hint=split_hint(num_splits))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("num_splits", [3, 16])
def test_split_kv_decode_over_long_and_extreme_inputs(impl, dtype, num_splits):
    long = AttentionCase(B=1, H=2, Hkv=1, Nq=1, Nk=LONG_NK, D=16, dtype=dtype, scale=0.3)
    q, k, v = long.tensors()
    out = impl.split_kv_decode(q, k, v + 3.0, num_splits=num_splits)
    check_attention(
        out, q, k, v + 3.0, causal=False, sm_scale=None,
        hint=f"over {LONG_NK} keys: keep each split's m, l and acc in float32 (a precision "
        f"failure if shorter caches pass); {split_hint(num_splits)}",
    )  # fmt: skip
    far = AttentionCase(B=1, H=2, Hkv=2, Nq=1, Nk=45, D=16, dtype=dtype, seed=8)
    q, k, v = strided(*scores_far_below_zero(far))
    out = impl.split_kv_decode(q, k, v, num_splits=num_splits)
    check_attention(
        out, q, k, v, causal=False, sm_scale=None,
        hint="every score about -200, in strided views (k's and v's strides differ): subtract "
        "each split's running max before exp2, pass each tensor's own strides, and weigh the "
        f"splits by exp(lse_s - max lse); {split_hint(num_splits)}",
    )  # fmt: skip


# The most keys one program of split_kv_decode may read beyond its share ceil(Nk / num_splits):
# ranges are whole key blocks of at most 128 keys, rounded up twice at most.
SPLIT_SLACK = 256


@pytest.mark.parametrize(("Nk", "num_splits"), [(1500, 2), (2500, 5), (2500, 16)])
def test_split_kv_decode_really_splits_long_caches(impl, Nk, num_splits):
    # Longer than the 256 keys every call's own check uses: a split that stops past some length
    # (one program per head for long caches) shows here.
    case = AttentionCase(B=1, H=1, Hkv=1, Nq=1, Nk=Nk, D=16, seed=11)
    q, k, v = case.tensors()
    out = impl.split_kv_decode(q, k, v, num_splits=num_splits)
    launches = impl.split_kv_decode.__guard__.last.launches  # what the harness counted
    check_attention(out, q, k, v, causal=False, sm_scale=None, hint=split_hint(num_splits))
    share = -(-Nk // num_splits)
    allowed = 2 * case.D * (share + SPLIT_SLACK) + 128 * case.D  # keys and values, and q
    most = max((launch.most_loaded_by_one_program for launch in launches), default=0)
    assert most <= allowed, (
        f"split_kv_decode(q, k, v, num_splits={num_splits}) over {Nk} keys had one kernel "
        f"program read {most} elements, about {most // (2 * case.D)} keys with their values; "
        f"each of the {num_splits} splits owns about {share} of them (whole key blocks of at "
        "most 128 keys, so at most "
        f"{share + SPLIT_SLACK}). Spread every cache over the splits, however long: a program "
        "per (head, split) on the grid's third axis, reading only its own range"
    )


def test_split_kv_decode_leaves_its_inputs_alone(impl):
    case = AttentionCase(B=1, H=2, Hkv=1, Nq=1, Nk=50, D=16, seed=4)
    q, k, v = case.tensors()
    before = [t.clone() for t in (q, k, v)]
    impl.split_kv_decode(q, k, v, num_splits=3)
    for name, t, original in zip("qkv", (q, k, v), before, strict=True):
        assert torch.equal(t, original), f"split_kv_decode modified its input {name}"


def _bad_decodes():
    q, k, v = AttentionCase(B=1, H=2, Hkv=2, Nq=3, Nk=40, D=16, seed=3).tensors()
    q1 = q[:, :, :1]
    return [
        (bad_call("split_kv_decode", (q, k, v), "3 queries, not 1"), r"\bq\b|Nq|quer"),
        *(
            (bad_call("split_kv_decode", (q1, k, v), why, num_splits=n), "num_splits")
            for why, n in [("num_splits 0", 0), ("a negative num_splits", -2)]
        ),
    ]


BAD_DECODES = [
    *bad_attention_inputs("split_kv_decode", Nq=1),
    *bad_head_dims("split_kv_decode", Nq=1),
    *_bad_decodes(),
]
WRONG_DECODE_SHAPES = wrong_decode_shapes()


@pytest.mark.parametrize(("bad", "names"), BAD_DECODES, ids=[str(b) for b, _ in BAD_DECODES])
def test_split_kv_decode_refuses_bad_inputs(impl, bad, names):
    assert_value_error(bad, impl, match=names)


@pytest.mark.parametrize(
    ("bad", "names"), WRONG_DECODE_SHAPES, ids=[str(b) for b, _ in WRONG_DECODE_SHAPES]
)
def test_split_kv_decode_refuses_every_wrong_shape(impl, bad, names):
    assert_value_error(bad, impl, match=names)
