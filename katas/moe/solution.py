"""The mixture-of-experts kata: your solution. Read katas/moe/README.md first.

Run the tests with `nox -s moe` (or `pytest katas/moe`).

Short names: T tokens, d model width, h expert hidden width, E experts, k experts per token,
N kept assignments (N = T·k without a capacity limit), C an expert's capacity. Inputs are never
modified, but may change between calls (weights updated in place): read their values on every
call. One expert may receive more than 2,048 assignments (float16 counts stop there, bfloat16
ones at 256): count in integers, never in x's or the logits' dtype. T = 0 (no tokens) is valid
everywhere but in the two losses: it gives empty results ([0, k] weights and experts, a plan
with N = 0 and counts of 0, [0, d] outputs). Every ValueError the tests expect is listed in each
docstring (and in the README).

Every call is checked by the harness (README, "Rules every call follows"):
- no argument is changed in place (tensors, lists);
- unchanged means bit for bit, layout and autograd state included, the models and modules you
  are given too (weights, buffers, train/eval mode), and also after the call has returned;
- the work is done with PyTorch on tensors (no NumPy, no DLPack, no bit-casts, no
  .tolist() or .item() of more than 256 float elements in a call);
- the work happens in the call's own thread (no threads or processes);
- results are plain torch.Tensor objects, never subclasses;
- the judge (the harness, the tests, Hypothesis's settings) is left alone, and PyTorch's global
  settings (grad mode, default dtype, ...) are as they were when a call returns;
- every call is held to a budget of work (elementwise products and sums count too);
- answers are computed when asked, never remembered from earlier calls (nor by the tensors'
  identity), and two calls never return the same tensor;
- the code behaves the same whether or not it is measured;
"""

from __future__ import annotations

from typing import NamedTuple

import torch

# Level 1: the router


def route(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k most probable experts of each token, most probable first, and their weights.

    logits [T, E] (any float dtype) -> weights [T, k] float32, experts [T, k] int64.
    probs = softmax(logits) over the E experts, computed in float32 (logits.float(), max
    subtracted: logits of 1e30 must not overflow); experts[t] are the k largest probs[t] in
    descending order; weights[t] = those k probabilities divided by their sum.
    ValueError (naming the argument) for logits that are not a float [T, E] tensor with E >= 1,
    and for k that is not an int in 1..E.
    """
    # TODO(level 1): softmax in float32, top k in descending order, renormalise
    raise NotImplementedError("level 1: route is not implemented yet")


# Level 2: capacity and the dispatch plan


def expert_capacity(num_tokens: int, k: int, num_experts: int, capacity_factor: float) -> int:
    """C = ceil(capacity_factor · T · k / E), the most assignments one expert serves (an int).

    capacity_factor is an int or a float; C is math.ceil of the Python float expression as it
    comes out (no epsilon, no exact fractions: 1.1 * 100 gives 111, 0.1 * 10 gives 1).
    ValueError for a capacity_factor that is not a finite number > 0, num_tokens not an int >= 0,
    num_experts not an int >= 1, or k not an int in 1..num_experts.
    """
    # TODO(level 2): count all T·k assignments, spread them over E experts, round up
    raise NotImplementedError("level 2: expert_capacity is not implemented yet")


class DispatchPlan(NamedTuple):
    """The kept assignments grouped by expert: expert 0's group first, then expert 1's, ...

    Within a group, assignments are in priority order: by rank, then by token index.
    (Given: a plain container, nothing to implement.)
    """

    token: torch.Tensor  # (N,) int64: the token of each kept assignment
    rank: torch.Tensor  # (N,) int64: its rank r, so the assignment is experts[token, rank]
    counts: torch.Tensor  # (E,) int64: the size of each expert's group


def plan_dispatch(
    experts: torch.Tensor, num_experts: int, *, capacity: int | None = None
) -> DispatchPlan:
    """Group the assignments experts [T, k] by expert, each expert keeping at most `capacity`.

    Priority is rank-major: every token's first choice (rank 0) comes before any token's second
    choice, and within a rank the lower token index wins. capacity None keeps everything;
    capacity 0 keeps nothing. All three fields are int64.
    ValueError for experts that are not int64 [T, k] with k in 1..num_experts and indices in
    0..num_experts-1, or a capacity that is neither None nor an int >= 0.
    """
    # TODO(level 2): flatten rank-major, stable-sort by expert, keep the first C of each group
    raise NotImplementedError("level 2: plan_dispatch is not implemented yet")


class ExpertLoad(NamedTuple):
    """How many assignments each expert was sent and how many it serves. (Given.)"""

    routed: torch.Tensor  # (E,) int64
    kept: torch.Tensor  # (E,) int64, min(routed, C)


def expert_load(
    experts: torch.Tensor, num_experts: int, *, capacity: int | None = None
) -> ExpertLoad:
    """The per-expert load report of experts [T, k]: routed counts, and kept = min(routed, C).

    capacity None: no limit; capacity 0: nothing kept. ValueError as plan_dispatch.
    """
    # TODO(level 2): count the assignments per expert, and clamp them to the capacity
    raise NotImplementedError("level 2: expert_load is not implemented yet")


# Level 3: dispatch, run each expert once, combine


def dispatch(x: torch.Tensor, plan: DispatchPlan) -> torch.Tensor:
    """Permute tokens into expert order: x [T, d] -> [N, d], row i is x[plan.token[i]].

    ValueError for x that is not [T, d].
    """
    # TODO(level 3): gather the rows of x in the plan's order
    raise NotImplementedError("level 3: dispatch is not implemented yet")


def combine(
    expert_out: torch.Tensor, weights: torch.Tensor, plan: DispatchPlan, num_tokens: int
) -> torch.Tensor:
    """Scatter-add the weighted expert outputs back to their tokens: [N, d] -> [T, d].

    y[t] = Σ over kept assignments i of token t of weights[t, plan.rank[i]] · expert_out[i],
    summed in float32 (float64 for float64 expert_out) and returned in expert_out's dtype. A
    token with no kept assignment gets 0. weights [T, k] float32; num_tokens = T.
    ValueError for expert_out that is not [N, d] for the plan's N, or weights not [T, k].
    """
    # TODO(level 3): scatter-ADD the weighted rows back to their tokens
    raise NotImplementedError("level 3: combine is not implemented yet")


def expert_mlp(
    x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """One expert, a gated MLP: (silu(x @ w1) * (x @ w3)) @ w2.

    x [n, d] float; w1, w3 [d, h]; w2 [h, d], all in x's dtype -> [n, d], computed in x's dtype:
    no upcast, each of x @ w1, x @ w3, the gated product and the last matmul is in x's dtype.
    ValueError (naming the argument) for shapes that do not fit or weights in another dtype.
    """
    # TODO(level 3): the gated MLP
    raise NotImplementedError("level 3: expert_mlp is not implemented yet")


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The sparse MoE layer: y_t = Σ_r weights[t, r] · expert_{experts[t, r]}(x_t).

    x [T, d] float; gate_w [E, d] in any float dtype; w1, w3 [E, d, h]; w2 [E, h, d] in x's
    dtype -> y [T, d] in x's dtype. The router runs in float32 for every dtype of x (float64
    too): logits = x.float() @ gate_w.float().T, then route(logits, k). Each expert runs once,
    in x's dtype (no float32 copies), on exactly the tokens routed to it (and kept): the
    multiplications grow with T·k, never T·E, whether by matrix products or by broadcasting,
    and no tensor exceeds T·k·max(E, d, h) elements. capacity_factor None means no limit;
    otherwise each expert serves its first C = expert_capacity(T, k, E, capacity_factor)
    assignments in priority order, a dropped assignment adds 0, and the token's other weights
    are NOT renormalised. T = 0 gives an empty y [0, d].
    ValueError (naming the argument) for shapes that do not fit together, w1/w3/w2 not in x's
    dtype, k not an int in 1..E, and a capacity_factor that is not a finite number > 0.
    """
    # TODO(level 3): route, plan, dispatch, run each expert on its group, combine
    raise NotImplementedError("level 3: moe_forward is not implemented yet")


# Level 4: the router's auxiliary losses


def load_balancing_loss(logits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """E · Σ_e f_e · P_e, a scalar: exactly 1 at perfect balance, E when one expert takes all.

    logits [T, E] (any float dtype); experts [T, k] int64. f_e = (assignments to e) / (T · k),
    a count; P_e = mean over all T tokens of softmax(logits.float())[:, e], differentiable.
    Returns a float32 0-dim scalar (shape [], not [1]). ValueError for logits that are not a
    float [T, E] tensor with T >= 1, or experts that is not int64 [T, k] for the same T with
    indices in 0..E-1.
    """
    # TODO(level 4): E · Σ_e f_e · P_e
    raise NotImplementedError("level 4: load_balancing_loss is not implemented yet")


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """mean over tokens of logsumexp(logits [T, E])², a float32 0-dim scalar: keeps logits small.

    Upcast to float32 first and use a stable logsumexp (logits of 10^4 must not overflow).
    ValueError for logits that are not a float [T, E] tensor with T, E >= 1.
    """
    # TODO(level 4): a stable logsumexp in float32, squared, averaged over tokens
    raise NotImplementedError("level 4: router_z_loss is not implemented yet")
