"""Level 3: linear attention, in its parallel and its recurrent form.

Run: `pytest katas/efficient_attention -k 3_linear [--impl ...]`.
Order: worked examples and bad inputs first (cheap), then the cost counters, then properties.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from grading.judge.attention import AttentionCase
from grading.judge.cost import count_flops, elements_written, largest_tensor
from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import randn, seeds
from grading.judge.tolerance import assert_close
from katas.efficient_attention.cases import cases, linear_attention_oracle, strided_like_a_model

# phi(0) = 1: with zero queries and keys every key weighs the same, so each output is the mean
# of the values 1, 2, 4, 8 it reads.
Q0 = torch.zeros(1, 1, 4, 1)
V = torch.tensor([1.0, 2.0, 4.0, 8.0]).view(1, 1, 4, 1)
CAUSAL_MEANS = [1.0, 1.5, 7 / 3, 15 / 4]

PRECISION_HINT = (
    "this is a precision failure: over thousands of tokens the sums S and z grow into the "
    "thousands, where float16/bfloat16 cannot add a 1 any more. Keep S and z (and the state) in "
    "float32 and cast only the output to q's dtype."
)


def column(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64).view(1, 1, -1, 1)


def run_steps(impl, q, k, v, state=None):
    """linear_attention_step over every position of q, k, v (B, h, N, d); (outputs, state)."""
    outs = []
    for t in range(q.shape[2]):
        o_t, state = impl.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outs.append(o_t)
    return torch.stack(outs, dim=2), state


# ----------------------------------------------------------------------------------------------
# Worked examples


@pytest.mark.parametrize("causal, expected", [(False, [3.75] * 4), (True, CAUSAL_MEANS)])
def test_linear_attention_worked_example(impl, causal, expected):
    out = impl.linear_attention(Q0, Q0, V, causal=causal)
    assert_close(
        out,
        column(*expected),
        hint="phi(0) = elu(0) + 1 = 1, so every key weighs the same and o_i is a mean of the "
        "values seen: the numerator phi(q)ᵀS needs the denominator phi(q)ᵀz.",
    )


def test_linear_attention_step_worked_example(impl):
    outs, _ = run_steps(impl, Q0, Q0, V)
    assert_close(
        outs,
        column(*CAUSAL_MEANS),
        hint="each step adds phi(k_t) v_tᵀ to S and phi(k_t) to z; replacing them instead of "
        "adding forgets the past.",
    )


# ----------------------------------------------------------------------------------------------
# Bad input

_q, _k, _v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 8)
_qt, _kt, _vt = _q[:, :, 0], _k[:, :, 0], _v[:, :, 0]  # (1, 4, 16), (1, 2, 16), (1, 2, 8)
_state = (torch.zeros(1, 4, 16, 8), torch.ones(1, 4, 16))

BAD_CALLS = [
    BadCall("linear_attention(q with 4 heads, k and v with 3)",
            "kv heads that do not divide the query heads",
            lambda impl: impl.linear_attention(
                _q, torch.randn(1, 3, 8, 16), torch.randn(1, 3, 8, 8))),
    BadCall("linear_attention(q, k of length 8, v of length 5)", "v shorter than k",
            lambda impl: impl.linear_attention(_q, _k, _v[:, :, :5])),
    BadCall("linear_attention(q with D=16, k with D=4, v)", "k's head dim differs",
            lambda impl: impl.linear_attention(_q, _k[..., :4], _v)),
    BadCall("linear_attention(q of shape [4, 8, 16], k, v)", "a 3-D q",
            lambda impl: impl.linear_attention(_q[0], _k, _v)),
    BadCall("linear_attention(q float16, k, v float32)", "q, k and v of different dtypes",
            lambda impl: impl.linear_attention(_q.half(), _k, _v)),
    BadCall("linear_attention_step(q_t, k_t, v_t, state with S [1, 4, 8, 8])",
            "a state of the wrong shape",
            lambda impl: impl.linear_attention_step(
                _qt, _kt, _vt, (torch.zeros(1, 4, 8, 8), torch.ones(1, 4, 8)))),
    BadCall("linear_attention_step(q_t of shape [4, 16], k_t, v_t)", "a 2-D q_t",
            lambda impl: impl.linear_attention_step(_qt[0], _kt, _vt)),
    BadCall("linear_attention_step(q_t with D=16, k_t with D=4, v_t)", "k_t's head dim differs",
            lambda impl: impl.linear_attention_step(_qt, _kt[..., :4], _vt)),
    BadCall("linear_attention_step(q_t with 4 heads, k_t and v_t with 3)",
            "kv heads that do not divide the query heads",
            lambda impl: impl.linear_attention_step(
                _qt, torch.randn(1, 3, 16), torch.randn(1, 3, 8))),
    BadCall("linear_attention_step(q_t, k_t with 2 heads, v_t with 1)", "v_t's heads differ",
            lambda impl: impl.linear_attention_step(_qt, _kt, _vt[:, :1])),
    BadCall("linear_attention_step(q_t float32, k_t bfloat16, v_t float32)",
            "q_t, k_t and v_t of different dtypes",
            lambda impl: impl.linear_attention_step(_qt, _kt.bfloat16(), _vt)),
    BadCall("linear_attention_step(q_t, k_t, v_t, state with z [1, 4, 1])",
            "a state whose z has the wrong shape",
            lambda impl: impl.linear_attention_step(
                _qt, _kt, _vt, (torch.zeros(1, 4, 16, 8), torch.ones(1, 4, 1)))),
    BadCall("linear_attention_step(q_t, k_t, v_t, state with z [4, 16])",
            "a state whose z has no batch dimension",
            lambda impl: impl.linear_attention_step(
                _qt, _kt, _vt, (torch.zeros(1, 4, 16, 8), torch.ones(4, 16)))),
    BadCall("linear_attention_step(q_t, k_t, v_t, state with z [1, 4, 16, 8])",
            "a state whose z is shaped like S",
            lambda impl: impl.linear_attention_step(
                _qt, _kt, _vt, (torch.zeros(1, 4, 16, 8), torch.ones(1, 4, 16, 8)))),
    BadCall("linear_attention(q of shape [1, 4, 0, 16], k, v)", "no queries",
            lambda impl: impl.linear_attention(_q[:, :, :0], _k, _v)),
    BadCall("linear_attention(q, k and v of length 0)", "no keys",
            lambda impl: impl.linear_attention(_q, _k[:, :, :0], _v[:, :, :0])),
    BadCall("linear_attention(q, k with D=0, v)", "a head dim of 0",
            lambda impl: impl.linear_attention(_q[..., :0], _k[..., :0], _v)),
    BadCall("linear_attention(q, k, v with batch 0)", "a batch of 0",
            lambda impl: impl.linear_attention(_q[:0], _k[:0], _v[:0])),
    BadCall("linear_attention_step(q_t, k_t, v_t with batch 0)", "a step with batch 0",
            lambda impl: impl.linear_attention_step(_qt[:0], _kt[:0], _vt[:0])),
    BadCall("linear_attention_step(q_t, k_t with D=0, v_t)", "a step with head dim 0",
            lambda impl: impl.linear_attention_step(_qt[..., :0], _kt[..., :0], _vt)),
    BadCall("linear_attention_step(q_t, k_t and v_t with 0 heads)", "a step with no kv heads",
            lambda impl: impl.linear_attention_step(_qt, _kt[:, :0], _vt[:, :0])),
    BadCall("linear_attention_step(q_t, k_t, v_t with Dv=0)", "a step with values of size 0",
            lambda impl: impl.linear_attention_step(_qt, _kt, _vt[..., :0])),
]  # fmt: skip


# What each ValueError's message must name.
NAMES = {
    "kv heads that do not divide the query heads": "k|q|k_t|q_t",
    "v shorter than k": "v",
    "k's head dim differs": "k",
    "a 3-D q": "q",
    "q, k and v of different dtypes": "q|k|v",
    "a state of the wrong shape": "state|S",
    "a 2-D q_t": "q_t",
    "k_t's head dim differs": "k_t",
    "v_t's heads differ": "v_t",
    "q_t, k_t and v_t of different dtypes": "q_t|k_t|v_t",
    "a state whose z has the wrong shape": "state|z",
    "a state whose z has no batch dimension": "state|z",
    "a state whose z is shaped like S": "state|z",
    "no queries": "q",
    "no keys": "k|v",
    "a head dim of 0": "q|k",
    "a batch of 0": "q|k|v",
    "a step with batch 0": "q_t|k_t|v_t",
    "a step with head dim 0": "q_t|k_t",
    "a step with no kv heads": "k_t|v_t",
    "a step with values of size 0": "v_t",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_linear_attention_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


def test_linear_attention_leaves_its_inputs_alone(impl):
    q, k, v = torch.randn(1, 2, 9, 4), torch.randn(1, 1, 9, 4), torch.randn(1, 1, 9, 4)
    state = (torch.rand(1, 2, 4, 4), torch.rand(1, 2, 4) + 1)
    saved = [t.clone() for t in (q, k, v, *state)]
    impl.linear_attention(q, k, v)
    impl.linear_attention_step(q[:, :, 0], k[:, :, 0], v[:, :, 0], state)
    for name, before, after in zip(
        ["q", "k", "v", "S", "z"], saved, (q, k, v, *state), strict=True
    ):
        assert torch.equal(before, after), f"{name} was changed in place (S, z: the state)"


# ----------------------------------------------------------------------------------------------
# Cost, counted deterministically: FLOPs of matrix products, the largest tensor made, and the
# elements every op writes (elementwise products and sums cost no FLOPs but write elements)


@pytest.mark.parametrize("D", [8, 64])
def test_linear_attention_cost_is_linear_in_n(impl, figures, D):
    flops, written, biggest = {}, {}, None
    for N in (1024, 2048):
        q, k, v = (randn((1, 1, N, D), seed=s) for s in range(3))
        _, flops[N] = count_flops(impl.linear_attention, q, k, v)
        _, written[N] = elements_written(impl.linear_attention, q, k, v)
        _, biggest = largest_tensor(impl.linear_attention, q, k, v)
        if D == 8:
            assert biggest.numel <= N * N // (8 if N == 1024 else 16), (
                f"largest tensor made at N={N}, D={D}: {biggest}. Linear attention never forms "
                "the N x N matrix phi(Q) phi(K)ᵀ, not even for short sequences: keep a running "
                "D x Dv state, or chunks of C x C."
            )
    figures.record("linear attention largest tensor / N²", biggest.numel / 2048**2, "", N=2048, D=D)
    assert flops[2048] <= 2.2 * flops[1024], (
        f"at D={D} doubling N multiplied the FLOPs by {flops[2048] / max(flops[1024], 1):.2f}; "
        "O(N · D²) work doubles."
    )
    assert written[2048] <= 2.2 * written[1024], (
        f"at D={D} doubling N multiplied the elements written by all ops by "
        f"{written[2048] / max(written[1024], 1):.2f}; O(N · D²) work doubles. phi(q_i)·phi(k_j) "
        "for every pair, made by broadcasting and summing, costs no FLOPs but writes N² · D."
    )


# ----------------------------------------------------------------------------------------------
# Properties


@given(case=cases(max_len=80), causal=st.booleans())
@example(case=AttentionCase(H=2, Hkv=1, Nq=70, Nk=67, D=4, Dv=3), causal=True)
@example(case=AttentionCase(B=2, Nq=3, Nk=70, D=1), causal=True)
def test_linear_attention_matches_quadratic_form(impl, case: AttentionCase, causal):
    q, k, v = case.tensors()
    out = impl.linear_attention(q, k, v, causal=causal)
    assert out.dtype == q.dtype, f"got {out.dtype} for {q.dtype} inputs; outputs have q's dtype"
    assert_close(
        out,
        linear_attention_oracle(q, k, v, causal=causal),
        hint="o_i = phi(q_i)ᵀ S_i / phi(q_i)ᵀ z_i with phi = elu + 1; causal sums j <= i + Nk - Nq "
        "(bottom-right: keys before the first query are a prefix every query sees), otherwise "
        "all j. Chunked: the state entering a chunk holds the earlier chunks only.",
    )


def test_linear_attention_with_small_features_adds_no_epsilon(impl):
    """Queries and keys about -3: phi(x) = exp(x) is about 0.05 there, so the first query's
    denominator (one key, D = 2) is about 5e-3. The ratio is exact; an epsilon added to the
    denominator (1e-6) moves the first outputs by 2e-4 of their size, ten times the tolerance."""
    q = randn((1, 2, 9, 2), seed=1, scale=0.1) - 3.0
    k = randn((1, 1, 9, 2), seed=2, scale=0.1) - 3.0
    v = randn((1, 1, 9, 3), seed=3)
    hint = (
        "the first query sees one key and phi(q)·phi(k) is about 5e-3: the denominator "
        "phi(q_i)ᵀ z_i is never 0 (phi > 0), so divide by it as it is; an epsilon added to it "
        "shows"
    )
    want = linear_attention_oracle(q, k, v, causal=True)
    assert_close(impl.linear_attention(q, k, v, causal=True), want, hint=hint)
    outs, _ = run_steps(impl, q, k, v)
    assert_close(outs, want, name="linear_attention_step, token by token", hint=hint)


@given(case=cases(max_len=24, same_length=True), data=st.data())
def test_linear_attention_steps_match_parallel_form_and_carry_on(impl, case: AttentionCase, data):
    q, k, v = case.tensors()
    t_split = data.draw(st.integers(0, case.Nq), label="steps before the state is carried on")
    state, outs = None, []
    for t in range(case.Nq):
        if t == t_split and state is not None:
            carried = tuple(s.clone() for s in state)
        o_t, state = impl.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], state)
        outs.append(o_t)
    outs = torch.stack(outs, dim=2)
    assert outs.dtype == q.dtype, f"steps gave {outs.dtype} for {q.dtype} inputs: q_t's dtype"
    assert_close(
        outs,
        linear_attention_oracle(q, k, v, causal=True),
        hint="the recurrent form: S += phi(k_t) v_tᵀ, z += phi(k_t), o_t = phi(q_t)ᵀS / phi(q_t)ᵀz",
    )
    assert_close(
        impl.linear_attention(q, k, v, causal=True),
        outs.double(),
        hint="the parallel form and the recurrent steps must give the same outputs",
    )
    if 0 < t_split < case.Nq:  # the state after t_split steps carries the whole past on
        o_t, _ = impl.linear_attention_step(
            q[:, :, t_split], k[:, :, t_split], v[:, :, t_split], carried
        )
        assert_close(
            o_t, outs[:, :, t_split].double(), hint="a carried state must resume the run exactly"
        )
    B, H, D, Dv = case.B, case.H, case.D, case.value_dim
    assert tuple(state[0].shape) == (B, H, D, Dv) and tuple(state[1].shape) == (B, H, D), (
        f"after {case.Nq} steps the state is {[tuple(s.shape) for s in state]}; it must stay "
        f"S [{B}, {H}, {D}, {Dv}] and z [{B}, {H}, {D}] however many tokens went by"
    )
    assert state[0].dtype == state[1].dtype == torch.float32, (
        f"the state is ({state[0].dtype}, {state[1].dtype}) for {case.dtype} inputs; S and z are "
        "float32 whatever the inputs' dtype (a low-precision sum drifts over a long decode)"
    )


@given(case=cases(max_len=12, same_length=True), other_seed=seeds())
def test_two_interleaved_streams_of_the_same_shape_stay_apart(impl, case, other_seed):
    """Two sequences decoded in turn, a step of one then a step of the other, each with its own
    state: neither may see the other's tokens."""
    streams = [case.tensors(), case.reseeded(other_seed).tensors()]  # [(q, k, v)] x 2
    states, outs = [None, None], [[], []]
    for t in range(case.Nq):
        for i, (q, k, v) in enumerate(streams):
            o_t, states[i] = impl.linear_attention_step(
                q[:, :, t], k[:, :, t], v[:, :, t], states[i]
            )
            outs[i].append(o_t)
    for i, (q, k, v) in enumerate(streams):
        assert_close(
            torch.stack(outs[i], dim=2),
            linear_attention_oracle(q, k, v, causal=True),
            name=f"stream {i}",
            hint="two streams of the same shape stepped in turn must not share storage: each "
            "step returns a state of its own (no buffer kept between calls and written again)",
        )


@given(case=cases(max_len=12, same_length=True), other_seed=seeds())
@example(case=AttentionCase(H=2, Hkv=1, Nq=5, Nk=5, D=4, Dv=3), other_seed=1)
def test_linear_attention_states_are_kept_and_resumed(impl, case, other_seed):
    """Every state a step returns stays the caller's: one stream keeps them all while another
    stream of the same shape decodes in between, then resumes from each of them, the oldest last.
    Each resumed step must equal a fresh computation."""
    q, k, v = case.tensors()
    other = case.reseeded(other_seed).tensors()  # (q, k, v) of another stream, the same shapes
    states, other_state = [None], None  # states[t]: the state after t steps
    for t in range(case.Nq):
        _, state = impl.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], states[-1])
        states.append(state)
        _, other_state = impl.linear_attention_step(*(x[:, :, t] for x in other), other_state)
    expected = linear_attention_oracle(q, k, v, causal=True)  # (B, H, N, Dv)
    for t in reversed(range(case.Nq)):
        o_t, _ = impl.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], states[t])
        assert_close(
            o_t,
            expected[:, :, t],
            name=f"step {t} resumed from the state returned {case.Nq - t} step(s) before the last",
            hint="a state a step returned is the caller's to keep: resuming from one returned "
            "several steps ago (a beam, a rollback) must continue that history exactly. A buffer "
            "kept between calls and written again (two that alternate, say) overwrites states the "
            "caller still holds: return new tensors from every step",
        )


@given(case=cases(max_len=80, same_length=True), data=st.data())
def test_linear_attention_future_never_changes_the_past(impl, case: AttentionCase, data):
    q, k, v = case.tensors()
    t0 = data.draw(st.integers(0, case.Nq - 1), label="first changed position")
    later = (torch.arange(case.Nq) >= t0)[:, None]
    k2 = torch.where(later, randn(k.shape, seed=case.seed + 5, dtype=k.dtype, scale=3.0), k)
    v2 = torch.where(later, randn(v.shape, seed=case.seed + 6, dtype=v.dtype, scale=10.0), v)
    before = impl.linear_attention(q, k, v, causal=True)[:, :, :t0]
    after = impl.linear_attention(q, k2, v2, causal=True)[:, :, :t0]
    assert_close(
        after,
        before.double(),
        hint=f"changing keys at positions >= {t0} changed earlier outputs: the causal sums "
        "must stop at each query (a chunk's state must not include the chunk itself or later ones)",
    )


@given(case=cases(max_len=40), causal=st.booleans())
def test_linear_attention_reads_strided_inputs(impl, case: AttentionCase, causal):
    q, k, v = case.tensors()
    views = [strided_like_a_model(t, pad) for t, pad in zip((q, k, v), (1, 0, 4), strict=True)]
    assert_close(
        impl.linear_attention(*views, causal=causal),
        linear_attention_oracle(q, k, v, causal=causal),
        hint="q, k and v here are transposed views of (B, N, heads, d + padding) storage, and k "
        "and v have different strides: use reshape, not view.",
    )
    if case.Nq == case.Nk:
        outs, _ = run_steps(impl, *views)
        assert_close(
            outs,
            linear_attention_oracle(q, k, v, causal=True),
            hint="linear_attention_step on slices of strided q, k and v",
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_linear_attention_over_thousands_of_tokens_keeps_float32_precision(impl, dtype):
    q, k, v = AttentionCase(H=2, Hkv=1, Nq=2048, Nk=2048, D=4, dtype=dtype, seed=3).tensors()
    expected = linear_attention_oracle(q, k, v, causal=True)
    assert_close(impl.linear_attention(q, k, v, causal=True), expected, hint=PRECISION_HINT)
    outs, state = run_steps(impl, q, k, v)
    assert_close(outs, expected, hint=PRECISION_HINT + " (2048 recurrent steps)")


def test_linear_attention_float64_inputs_give_float64_outputs(impl):
    q, k, v = AttentionCase(H=2, Hkv=1, Nq=9, Nk=9, D=4, Dv=3, dtype=torch.float64).tensors()
    hint = (
        "outputs have q's dtype, float64 included (compute in float32 or float64, then cast the "
        "output to q.dtype)"
    )
    for causal in (True, False):
        out = impl.linear_attention(q, k, v, causal=causal)
        assert out.dtype == torch.float64, f"got {out.dtype} for float64 inputs: {hint}"
        assert_close(
            out,
            linear_attention_oracle(q, k, v, causal=causal),
            dtype=torch.float32,  # float64 inputs may be computed in float32
            hint=f"float64 inputs, causal={causal}, checked at float32's tolerance",
        )
    outs, _ = run_steps(impl, q, k, v)
    assert outs.dtype == torch.float64, f"steps gave {outs.dtype} for float64 inputs: {hint}"
    assert_close(
        outs,
        linear_attention_oracle(q, k, v, causal=True),
        dtype=torch.float32,
        hint="float64 inputs, one step at a time, checked at float32's tolerance",
    )


def test_linear_attention_keeps_more_than_64_live_states(impl):
    """Three streams of the same shape decode 30 steps in turn and keep every state they were
    given back, 90 in all; then each resumes from every one of its states, the oldest first."""
    case = AttentionCase(H=2, Hkv=1, Nq=30, Nk=30, D=4, Dv=3)
    streams = [case.reseeded(seed).tensors() for seed in (0, 10, 20)]  # [(q, k, v)] x 3
    kept = [[None] for _ in streams]  # kept[i][t]: stream i's state after t steps
    for t in range(case.Nq):
        for i, (q, k, v) in enumerate(streams):
            _, state = impl.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], kept[i][-1])
            kept[i].append(state)
    for i, (q, k, v) in enumerate(streams):
        expected = linear_attention_oracle(q, k, v, causal=True)  # (B, H, N, Dv)
        for t in range(case.Nq):
            o_t, _ = impl.linear_attention_step(q[:, :, t], k[:, :, t], v[:, :, t], kept[i][t])
            assert_close(
                o_t,
                expected[:, :, t],
                name=f"stream {i}, step {t} resumed from the state it returned {3 * (30 - t)} "
                "calls before the last",
                hint="every state a step returns stays the caller's, however many are alive: "
                "here 90 of one shape. Storage kept between calls and written again (a pool of "
                "buffers reused in turn, of any size) overwrites states the caller still holds: "
                "return new tensors from every step",
            )
