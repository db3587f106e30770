"""The mixture-of-experts kata: your solution. Read katas/moe/README.md first.

Run the tests with `nox -s moe` (or `pytest katas/moe`).

Short names: T tokens, d model width, h expert hidden width, E experts, k experts per token,
N kept assignments (N = T·k without a capacity limit), C an expert's capacity.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

TODO = "not implemented yet — start with katas/moe/README.md"


# Level 1: the router


def route(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k most probable experts of each token, most probable first, and their weights.

    logits [T, E] (any float dtype) -> weights [T, k] float32, experts [T, k] int64.
    probs = softmax(logits) over the E experts, computed in float32; experts[t] are the k largest
    probs[t] in descending order; weights[t] = those k probabilities divided by their sum.
    ValueError for logits that are not [T, E] and for k outside 1..E.
    """
    # TODO: task 1, the router
    raise NotImplementedError(TODO)


# Level 2: capacity and the dispatch plan


def expert_capacity(num_tokens: int, k: int, num_experts: int, capacity_factor: float) -> int:
    """C = ceil(capacity_factor · T · k / E), the most assignments one expert serves.

    ValueError unless capacity_factor > 0.
    """
    # TODO: task 2, the capacity
    raise NotImplementedError(TODO)


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
    choice, and within a rank the lower token index wins. capacity None keeps everything.
    ValueError for experts that are not int64 [T, k] with indices in 0..num_experts-1.
    """
    # TODO: task 3, the dispatch plan
    raise NotImplementedError(TODO)


class ExpertLoad(NamedTuple):
    """How many assignments each expert was sent and how many it serves. (Given.)"""

    routed: torch.Tensor  # (E,) int64
    kept: torch.Tensor  # (E,) int64, min(routed, C)


def expert_load(
    experts: torch.Tensor, num_experts: int, *, capacity: int | None = None
) -> ExpertLoad:
    """The per-expert load report of experts [T, k]: routed counts, and kept = min(routed, C)."""
    # TODO: task 3, the load report
    raise NotImplementedError(TODO)


# Level 3: dispatch, run each expert once, combine


def dispatch(x: torch.Tensor, plan: DispatchPlan) -> torch.Tensor:
    """Permute tokens into expert order: x [T, d] -> [N, d], row i is x[plan.token[i]]."""
    # TODO: task 4, dispatch
    raise NotImplementedError(TODO)


def combine(
    expert_out: torch.Tensor, weights: torch.Tensor, plan: DispatchPlan, num_tokens: int
) -> torch.Tensor:
    """Scatter-add the weighted expert outputs back to their tokens: [N, d] -> [T, d].

    y[t] = Σ over kept assignments i of token t of weights[t, plan.rank[i]] · expert_out[i],
    summed in float32 and returned in expert_out's dtype. A token with no kept assignment gets 0.
    weights [T, k] float32; num_tokens = T.
    """
    # TODO: task 4, combine
    raise NotImplementedError(TODO)


def expert_mlp(
    x: torch.Tensor, w1: torch.Tensor, w3: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """One expert, a gated MLP: (silu(x @ w1) * (x @ w3)) @ w2.

    x [n, d]; w1, w3 [d, h]; w2 [h, d] -> [n, d], computed in x's dtype.
    """
    # TODO: task 4, one expert
    raise NotImplementedError(TODO)


def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None) -> torch.Tensor:
    """The sparse MoE layer: y_t = Σ_r weights[t, r] · expert_{experts[t, r]}(x_t).

    x [T, d]; gate_w [E, d]; w1, w3 [E, d, h]; w2 [E, h, d] -> y [T, d] in x's dtype.
    The router runs in float32: logits = x.float() @ gate_w.float().T, then route(logits, k).
    Each expert runs once, in x's dtype, on exactly the tokens routed to it (and kept): expert
    FLOPs grow with T·k, never T·E. capacity_factor None means no limit; otherwise each expert
    serves its first C = expert_capacity(T, k, E, capacity_factor) assignments in priority order,
    a dropped assignment adds 0, and the token's other weights are NOT renormalised.
    ValueError for shapes that do not fit together and for k outside 1..E.
    """
    # TODO: task 5, the layer
    raise NotImplementedError(TODO)


# Level 4: the router's auxiliary losses


def load_balancing_loss(logits: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """E · Σ_e f_e · P_e, a scalar: exactly 1 at perfect balance, E when one expert takes all.

    logits [T, E]; experts [T, k] int64. f_e = (assignments to e) / (T · k), a count;
    P_e = mean over all T tokens of softmax(logits)[:, e] in float32, differentiable.
    ValueError when experts is not [T, k] for the same T, or holds an index outside 0..E-1.
    """
    # TODO: task 6, the load-balancing loss
    raise NotImplementedError(TODO)


def router_z_loss(logits: torch.Tensor) -> torch.Tensor:
    """mean over tokens of logsumexp(logits [T, E])², a float32 scalar: it keeps logits small."""
    # TODO: task 6, the z-loss
    raise NotImplementedError(TODO)
