"""Level 1: `residual_distribution` and `accept_reject`, on hand-built distributions."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, note
from hypothesis import strategies as st

from grading.judge.errors import BadCall, assert_value_error
from grading.judge.strategies import seeds
from grading.judge.tolerance import assert_close
from katas.speculative_decoding.cases import Z, g_test, outcome_distribution


def probabilities(shape: tuple[int, ...], seed: int, scale: float = 1.5) -> torch.Tensor:
    """Random float64 distributions over the last dim, with no zero entry."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).softmax(dim=-1)


def sample_rows(q: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One token from each row of q (k, V): what a draft model would have proposed."""
    return torch.multinomial(q, 1, generator=gen)[:, 0]


# ----------------------------------------------------------------------------------------------
# residual_distribution


def test_residual_distribution_known_values(impl):
    p = torch.tensor([[0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.1, 0.6, 0.3]], dtype=torch.float64)
    q = torch.tensor([[0.2, 0.3, 0.5], [0.1, 0.2, 0.7], [0.1, 0.6, 0.3]], dtype=torch.float64)
    want = torch.tensor([[1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [0.1, 0.6, 0.3]], dtype=torch.float64)
    got = impl.residual_distribution(p, q)
    assert_close(
        got, want, name="residual_distribution",
        hint="row 0: max(0, p - q) = [0.3, 0, 0], normalised [1, 0, 0]; row 1: [0.3, 0.2, 0] "
        "normalised [0.6, 0.4, 0]; row 2 has p == q, so no mass is left and the answer is p",
    )  # fmt: skip


@given(
    lead=st.lists(st.integers(1, 3), max_size=2),
    V=st.integers(2, 9),
    equal_rows=st.booleans(),
    seed=seeds(),
)
def test_residual_distribution_is_the_normalised_excess(impl, lead, V, equal_rows, seed):
    p = probabilities((*lead, V), seed)
    q = probabilities((*lead, V), seed + 1)
    if equal_rows and lead:
        q[0] = p[0]  # some rows with no residual mass at all
    note(f"p = {p}\nq = {q}")
    excess = (p - q).clamp_min(0)
    mass = excess.sum(-1, keepdim=True)
    want = torch.where(mass > 0, excess / mass.clamp_min(1e-300), p)
    got = impl.residual_distribution(p, q)
    assert_close(
        got, want, name="residual_distribution", scale=1.0,
        hint="max(0, p - q) divided by its sum over the last dim, each row on its own",
    )  # fmt: skip


@given(
    lead=st.lists(st.integers(1, 3), max_size=2),
    V=st.integers(2, 9),
    exponent=st.one_of(st.sampled_from([-300, -200, -100, -30, -12]), st.integers(-300, -1)),
    seed=seeds(),
)
def test_residual_distribution_normalises_a_tiny_mass(impl, lead, V, exponent, seed):
    # p = (1 - eps) q + eps r, with r on tokens q never proposes: the excess is eps r, however
    # small eps is, and the residual is r, not p.
    eps = 10.0**exponent
    q = probabilities((*lead, V), seed)
    unseen = probabilities((*lead, V), seed + 1) < 1 / V  # (..., V): some tokens q never picks
    unseen[..., 0], unseen[..., -1] = True, False  # at least one token on each side
    q = torch.where(unseen, 0.0, q)
    q = q / q.sum(dim=-1, keepdim=True)
    r = torch.where(unseen, probabilities((*lead, V), seed + 2), 0.0)
    r = r / r.sum(dim=-1, keepdim=True)
    p = (1 - eps) * q + eps * r
    note(f"eps = {eps:g}\np = {p}\nq = {q}")
    excess = (p - q).clamp_min(0)
    want = excess / excess.sum(-1, keepdim=True)
    got = impl.residual_distribution(p, q)
    assert_close(
        got, want, name="residual_distribution", scale=1.0,
        hint=f"max(0, p - q) sums to only about {eps:g} here, but it is not zero: normalised it "
        "is a distribution like any other (the row of p is only for a mass of exactly 0). "
        "Usually: a threshold (mass > 1e-9) or an epsilon added to the sum",
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------
# accept_reject: the deterministic corners


@given(k=st.integers(1, 6), V=st.integers(2, 9), seed=seeds())
def test_p_equal_to_q_accepts_every_draft_token(impl, k, V, seed):
    p = probabilities((k + 1, V), seed)
    gen = torch.Generator().manual_seed(seed)
    draft = sample_rows(p[:k], gen)
    out = impl.accept_reject(p, p[:k].clone(), draft, gen)
    assert out.dtype == torch.long and list(out.shape) == [k + 1], (
        f"with p == q every one of the {k} draft tokens is accepted (min(1, p/q) = 1), so the "
        f"output is them plus a bonus token: expected int64 [{k + 1}], got {out.dtype} "
        f"{list(out.shape)}"
    )
    assert torch.equal(out[:k], draft), f"the accepted prefix {out[:k]} is not the draft {draft}"


@given(k=st.integers(1, 6), V=st.integers(2, 9), seed=seeds())
def test_bonus_token_is_drawn_from_the_last_row_of_p(impl, k, V, seed):
    p = probabilities((k + 1, V), seed)
    bonus = seed % V
    p[k] = torch.nn.functional.one_hot(torch.tensor(bonus), V).double()  # only `bonus` possible
    gen = torch.Generator().manual_seed(seed)
    draft = sample_rows(p[:k], gen)
    out = impl.accept_reject(p, p[:k].clone(), draft, gen)
    assert len(out) == k + 1 and int(out[-1]) == bonus, (
        f"all {k} draft tokens are accepted, so the last token must come from p[k] = "
        f"one-hot({bonus}); got {out.tolist()}. Usually: no bonus token, or drawn from p[k - 1]"
    )


@given(k=st.integers(2, 6), V=st.integers(3, 9), seed=seeds())
def test_the_first_rejection_ends_the_round(impl, k, V, seed):
    gen = torch.Generator().manual_seed(seed)
    q = probabilities((k, V), seed)
    p = torch.cat([q, probabilities((1, V), seed + 1)])  # accept everything, except:
    draft = sample_rows(q, gen)
    fix = torch.nn.functional.one_hot((draft[1] + 1) % V, V).double()
    p[1] = fix  # p[1, draft[1]] = 0: token 1 is always rejected, and the residual is `fix`
    out = impl.accept_reject(p, q, draft, gen)
    want = [int(draft[0]), int(fix.argmax())]
    assert out.tolist() == want, (
        f"draft {draft.tolist()}: token 0 has p == q (always accepted), token 1 has p = 0 "
        f"(always rejected) and residual one-hot({want[1]}), so the output must be {want}; got "
        f"{out.tolist()}. Tokens after the first rejection are dropped, even if p likes them"
    )


def accept_nothing(impl, p: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """accept_reject(p [1, V], q [0, V], draft_tokens [0]): a round that proposed nothing."""
    __tracebackhide__ = True
    V = p.shape[1]
    try:
        out = impl.accept_reject(p, p[:0].clone(), torch.zeros(0, dtype=torch.long), gen)
    except NotImplementedError:  # the level is not written yet
        raise
    except (RuntimeError, IndexError, ValueError) as error:
        raise AssertionError(
            f"accept_reject(p [1, {V}], q [0, {V}], draft_tokens [0]) raised "
            f"{type(error).__name__}: {error}\nk = 0 is valid (the last round of a decoding "
            "may propose nothing): there is no draft token to check, so return one token drawn "
            "from p[0]. Usually: draft_tokens.max() or .min() (which fail on an empty tensor) in "
            "the range check, or a check that refuses k = 0"
        ) from error
    assert out.dtype == torch.long and list(out.shape) == [1], (
        f"with k = 0 (nothing proposed) the output is the one token drawn from p[0]: expected "
        f"int64 [1], got {out.dtype} {list(out.shape)}"
    )
    return out


@given(V=st.integers(1, 9), data=st.data(), seed=seeds())
def test_with_no_draft_tokens_the_token_comes_from_p(impl, V, data, seed):
    token = data.draw(st.integers(0, V - 1), label="the only token p allows")
    p = torch.nn.functional.one_hot(torch.tensor([token]), V).double()  # (1, V)
    out = accept_nothing(impl, p, torch.Generator().manual_seed(seed))
    assert int(out[0]) == token, (
        f"k = 0 and p[0] = one-hot({token}) over V = {V}: the output must be [{token}], got "
        f"{out.tolist()}. With no draft token the round only samples p[0]"
    )


@pytest.mark.parametrize("V", [2, 3, 7])
def test_with_no_draft_tokens_the_token_has_p_s_distribution(impl, V):
    p = probabilities((1, V), V)
    gen = torch.Generator().manual_seed(V)
    samples = [tuple(accept_nothing(impl, p, gen).tolist()) for _ in range(4000)]
    passed, verdict = g_test(samples, outcome_distribution(p, p[:0]))
    assert passed, (
        f"over 4000 calls with k = 0 (nothing proposed), the output token does not follow p[0] "
        f"= {p[0].tolist()}: {verdict}. With no draft token the output is one sample of p[0]"
    )


def test_accept_reject_takes_its_randomness_from_the_generator(impl):
    p = probabilities((4, 5), 11)
    q = probabilities((3, 5), 12)
    draft = torch.tensor([0, 1, 2])
    runs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)  # must not matter
        gen = torch.Generator().manual_seed(7)
        runs.append([impl.accept_reject(p, q, draft, gen).tolist() for _ in range(30)])
    assert runs[0] == runs[1], (
        "two runs with generators seeded alike gave different outputs: draw every random number "
        "(the uniform for each test, the residual and bonus samples) with generator=generator"
    )


def test_accept_reject_without_a_generator_uses_the_global_one(impl):
    p = probabilities((4, 5), 11)
    q = probabilities((3, 5), 12)
    draft = torch.tensor([0, 1, 2])
    runs = {}
    with torch.random.fork_rng():
        for global_seed in (1, 1, 2, 3):
            torch.manual_seed(global_seed)
            runs.setdefault(global_seed, []).append(
                [impl.accept_reject(p, q, draft).tolist() for _ in range(30)]
            )
    assert runs[1][0] == runs[1][1], (
        "with generator=None the random numbers come from torch's global generator, so two runs "
        "after torch.manual_seed(1) must give the same tokens; they differed. Usually: a "
        "generator made inside the call with a seed of its own (from the clock or the OS)"
    )
    assert runs[1][0] != runs[2][0] or runs[1][0] != runs[3][0], (
        "with generator=None the random numbers come from torch's global generator, so runs "
        "after torch.manual_seed(1), (2) and (3) must differ (30 calls each, on distributions "
        "where every call has several likely outcomes); they were identical. Usually: a "
        "generator made inside the call with a fixed seed, such as "
        "torch.Generator().manual_seed(0)"
    )


def tiny_row(V: int, seed: int, tiny: float, at: int, zero: int) -> torch.Tensor:
    """A distribution over V tokens with `tiny` at token `at`, 0 at token `zero` (unless it is
    `at`), and the rest spread over the other tokens."""
    row = probabilities((V,), seed)
    row[at] = row[zero] = 0.0
    row = row / row.sum() * (1 - tiny)
    row[at] = tiny
    return row


EXPONENTS = st.one_of(st.sampled_from([-300, -200, -100, -30, -12]), st.integers(-300, -7))


@given(
    k=st.integers(1, 5),
    V=st.integers(3, 9),
    exponents=st.lists(EXPONENTS, min_size=6, max_size=6),
    ratios=st.lists(st.sampled_from([1.0, 1.5, 10.0, 1e6]), min_size=5, max_size=5),
    reject=st.integers(0, 5),
    seed=seeds(),
)
def test_a_tiny_draft_probability_is_judged_by_the_ratio_alone(
    impl, k, V, exponents, ratios, reject, seed
):
    # Every draft token has a tiny q (down to 1e-300). Before row `reject`, p gives it `ratio`
    # times as much: min(1, p/q) = 1, accepted whatever the uniform. Row `reject` gives it p = 0:
    # rejected whatever the uniform, and the residual is all on one token z, by a mass as tiny.
    gen = torch.Generator().manual_seed(seed)
    draft = torch.randint(0, V, (k,), generator=gen)
    q = probabilities((k, V), seed)  # rows after the rejection: never looked at
    p = probabilities((k + 1, V), seed + 1)
    want = []
    for i in range(min(reject, k)):
        x, tiny = int(draft[i]), 10.0 ** exponents[i]
        q[i] = tiny_row(V, seed + i, tiny, x, x)
        p[i] = tiny_row(V, seed + 100 + i, ratios[i] * tiny, x, x)
        want.append(x)
    if reject < k:
        x, tiny = int(draft[reject]), 10.0 ** exponents[reject]
        z = (x + 1 + seed % (V - 1)) % V  # the one token where p > q
        q[reject] = tiny_row(V, seed + reject, tiny, x, z)
        p[reject] = q[reject].clone()
        p[reject, x], p[reject, z] = 0.0, tiny
        want.append(z)
    else:
        want.append(seed % V)
        p[k] = torch.nn.functional.one_hot(torch.tensor(want[-1]), V).double()
    note(f"draft = {draft.tolist()}\np = {p}\nq = {q}")
    got = impl.accept_reject(p, q, draft, gen)
    rows = [f"{float(q[i, int(draft[i])]):.0e}" for i in range(min(reject + 1, k))]
    assert got.tolist() == want, (
        f"draft {draft.tolist()} with q at the draft tokens {rows} (tiny, but not zero): the "
        f"first {min(reject, k)} have p/q >= 1, so min(1, p/q) = 1 and they are always "
        + (
            f"accepted; token {reject} has p = 0, so it is always rejected, and its residual "
            f"max(0, p - q) is all on token {want[-1]} (a mass as tiny). "
            if reject < k
            else f"accepted; the bonus comes from p[{k}] = one-hot({want[-1]}). "
        )
        + f"Expected {want}, got {got.tolist()}. Usually: an epsilon in the ratio "
        "(p / (q + eps)) that swamps a tiny q, or a residual mass below some threshold treated "
        "as none"
    )


# ----------------------------------------------------------------------------------------------
# accept_reject: the distribution, counted


def test_acceptance_probability_is_min_one_p_over_q(impl):
    n = 4000
    q = torch.tensor([[0.4, 0.2, 0.2, 0.2]], dtype=torch.float64)
    p = torch.tensor([[0.1, 0.5, 0.2, 0.2], [0.25, 0.25, 0.25, 0.25]], dtype=torch.float64)
    draft = torch.tensor([0])  # p / q = 0.25 for this token
    gen = torch.Generator().manual_seed(2024)
    accepted = sum(len(impl.accept_reject(p, q, draft, gen)) == 2 for _ in range(n))
    rate, want = accepted / n, 0.25
    sd = math.sqrt(want * (1 - want) / n)
    assert abs(rate - want) <= Z * sd, (
        f"a draft token with p = 0.1 and q = 0.4 must be accepted with probability "
        f"min(1, p/q) = 0.25; it was accepted in {accepted} of {n} calls ({rate:.3f}). "
        "0 means accepting only when p >= q; 1 means q/p or accepting always"
    )


HAND_BUILT = {  # name: (p, q); every case has tokens with p > q, p < q and p = q
    "k1-V3": (
        [[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]],
        [[0.2, 0.3, 0.5]],
    ),
    "k2-V3": (
        [[0.6, 0.1, 0.3], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]],
        [[0.3, 0.4, 0.3], [0.5, 0.2, 0.3]],
    ),
    "k3-V2": (
        [[0.7, 0.3], [0.2, 0.8], [0.5, 0.5], [0.9, 0.1]],
        [[0.4, 0.6], [0.5, 0.5], [0.5, 0.5]],
    ),
}


@pytest.mark.parametrize("name", HAND_BUILT)
def test_accept_reject_output_has_the_exact_distribution(impl, name):
    p, q = (torch.tensor(x, dtype=torch.float64) for x in HAND_BUILT[name])
    expected = outcome_distribution(p, q)
    draft_gen, gen = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    samples = [
        tuple(impl.accept_reject(p, q, sample_rows(q, draft_gen), gen).tolist())
        for _ in range(4000)
    ]
    passed, verdict = g_test(samples, expected)
    assert passed, (
        f"over 4000 calls with draft tokens drawn from q, the outputs do not follow the exact "
        f"distribution: {verdict}.\np = {p.tolist()}\nq = {q.tolist()}\nUsually: after a "
        "rejection the token must come from max(0, p - q) normalised, not from p; acceptance is "
        "random with probability min(1, p/q), not p >= q"
    )


def test_without_a_generator_the_output_has_the_exact_distribution(impl):
    # generator=None: every random number from torch's global generator, so the outputs of
    # calls made one after another, after one torch.manual_seed, follow the exact distribution.
    p, q = (torch.tensor(x, dtype=torch.float64) for x in HAND_BUILT["k2-V3"])
    draft_gen = torch.Generator().manual_seed(3)
    with torch.random.fork_rng():
        torch.manual_seed(2025)
        samples = [
            tuple(impl.accept_reject(p, q, sample_rows(q, draft_gen)).tolist()) for _ in range(1000)
        ]
    passed, verdict = g_test(samples, outcome_distribution(p, q))
    assert passed, (
        f"over 1000 calls without a generator (after one torch.manual_seed), the outputs do "
        f"not follow the exact distribution: {verdict}.\np = {p.tolist()}\nq = {q.tolist()}\n"
        "With generator=None every random number (the uniforms, the residual and bonus "
        "samples) comes from torch's global generator, which moves on after each draw. "
        "Usually: a generator of the call's own, made with a fixed seed (or the global seed) "
        "for some of the draws, so that every call repeats them"
    )


# ----------------------------------------------------------------------------------------------
# bad input

P3 = torch.full((3, 4), 0.25, dtype=torch.float64)
Q2 = torch.full((2, 4), 0.25, dtype=torch.float64)
X2 = torch.tensor([0, 1])

BAD_CALLS = [
    BadCall(
        "residual_distribution(p [3, 4], q [2, 4])",
        "p and q of different shapes",
        lambda impl: impl.residual_distribution(P3, Q2),
    ),
    BadCall(
        "residual_distribution(p [], q [])",
        "no vocabulary dimension",
        lambda impl: impl.residual_distribution(torch.tensor(1.0), torch.tensor(1.0)),
    ),
    BadCall(
        "accept_reject(p [3, 4], q [2, 4], draft_tokens [[0, 1]])",
        "draft_tokens not 1-D",
        lambda impl: impl.accept_reject(P3, Q2, X2[None]),
    ),
    BadCall(
        "accept_reject(p [3, 4], q [2, 4], draft_tokens float [2])",
        "draft_tokens not int64",
        lambda impl: impl.accept_reject(P3, Q2, X2.double()),
    ),
    BadCall(
        "accept_reject(p [3, 4], q [3, 4], draft_tokens [2])",
        "q with k + 1 rows",
        lambda impl: impl.accept_reject(P3, P3, X2),
    ),
    BadCall(
        "accept_reject(p [2, 4], q [2, 4], draft_tokens [2])",
        "p with k rows instead of k + 1",
        lambda impl: impl.accept_reject(Q2, Q2, X2),
    ),
    BadCall(
        "accept_reject(p [3, 5], q [2, 4], draft_tokens [2])",
        "p and q over different vocabularies",
        lambda impl: impl.accept_reject(torch.full((3, 5), 0.2), Q2, X2),
    ),
    BadCall(
        "accept_reject(p [3, 4], q [2, 4], draft_tokens [0, -1])",
        "a negative draft token",
        lambda impl: impl.accept_reject(P3, Q2, torch.tensor([0, -1])),
    ),
    BadCall(
        "accept_reject(p [3, 4], q [2, 4], draft_tokens [4, 0])",
        "a draft token past the vocabulary",
        lambda impl: impl.accept_reject(P3, Q2, torch.tensor([4, 0])),
    ),
]
# What each ValueError's message must name.
NAMES = {
    "p and q of different shapes": "p",
    "no vocabulary dimension": "p",
    "draft_tokens not 1-D": "draft_tokens",
    "draft_tokens not int64": "draft_tokens",
    "q with k + 1 rows": "q",
    "p with k rows instead of k + 1": "p",
    "p and q over different vocabularies": "p|q",
    "a negative draft token": "draft_tokens",
    "a draft token past the vocabulary": "draft_tokens",
}


@pytest.mark.parametrize("bad", BAD_CALLS, ids=str)
def test_accept_bad_input_raises_value_error(impl, bad):
    assert_value_error(bad, impl, match=NAMES[bad.why])


# The same errors with k = 0 (nothing proposed, so nothing to accept or reject): the arguments
# are still checked.
P1 = torch.full((1, 4), 0.25, dtype=torch.float64)
Q0 = torch.zeros(0, 4, dtype=torch.float64)
NO_TOKENS = torch.zeros(0, dtype=torch.long)

NO_DRAFT_CALLS = [
    BadCall("accept_reject(p [1, 4], q [0, 4], draft_tokens float [0])",
            "draft_tokens not int64, k = 0",
            lambda impl: impl.accept_reject(P1, Q0, torch.zeros(0)), names="draft_tokens"),
    BadCall("accept_reject(p [1, 4], q [0, 4], draft_tokens int32 [0])",
            "draft_tokens int32, k = 0",
            lambda impl: impl.accept_reject(P1, Q0, NO_TOKENS.int()), names="draft_tokens"),
    BadCall("accept_reject(p [1, 4], q [0, 4], draft_tokens [0, 1])",
            "draft_tokens not 1-D, k = 0",
            lambda impl: impl.accept_reject(P1, Q0, torch.zeros(0, 1, dtype=torch.long)),
            names="draft_tokens"),
    BadCall("accept_reject(p [1, 4], q [1, 4], draft_tokens [0])", "q with a row, k = 0",
            lambda impl: impl.accept_reject(P1, P1, NO_TOKENS), names="q"),
    BadCall("accept_reject(p [1, 4], q [4], draft_tokens [0])", "q 1-D, k = 0",
            lambda impl: impl.accept_reject(P1, P1[0], NO_TOKENS), names="q"),
    BadCall("accept_reject(p [2, 4], q [0, 4], draft_tokens [0])", "p with 2 rows, k = 0",
            lambda impl: impl.accept_reject(P3[:2], Q0, NO_TOKENS), names="p"),
    BadCall("accept_reject(p [1, 5], q [0, 4], draft_tokens [0])",
            "p and q over different vocabularies, k = 0",
            lambda impl: impl.accept_reject(torch.full((1, 5), 0.2), Q0, NO_TOKENS),
            names="p|q"),
    BadCall("accept_reject(p [4], q [0, 4], draft_tokens [0])", "p 1-D, k = 0",
            lambda impl: impl.accept_reject(P1[0], Q0, NO_TOKENS), names="p"),
]  # fmt: skip


@pytest.mark.parametrize("bad", NO_DRAFT_CALLS, ids=str)
def test_accept_bad_input_with_no_draft_tokens_raises_value_error(impl, bad):
    assert_value_error(bad, impl)
