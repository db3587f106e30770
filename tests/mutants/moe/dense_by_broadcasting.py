"""Bug: every expert runs on every token through broadcast products instead of matmuls.

(x[:, :, None] * w).sum(1) is a matrix product the FLOP counter does not see, so a dense layer
written this way looks free there; it still does E / k times the work and builds a
[E, T, d, h] tensor.
"""

CAUGHT_BY = ["test_expert_work_grows_with_k_not_with_E"]
EDITS = [
    (
        (
            "    grouped = dispatch(x, plan)  # (N, d)\n"
            "    out = torch.empty_like(grouped)  # (N, d)\n"
            "    start = 0\n"
            "    for e, count in enumerate(plan.counts.tolist()):\n"
            "        if count:  # an expert with no tokens costs nothing\n"
            "            rows = slice(start, start + count)\n"
            "            out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])\n"
            "            start += count\n"
            "    return combine(out, weights, plan, T)\n"
        ),
        (
            "    gates = torch.zeros(T, E, dtype=x.dtype)  # (T, E): kept weights, 0 elsewhere\n"
            "    chosen = experts[plan.token, plan.rank]\n"
            "    gates[plan.token, chosen] = weights[plan.token, plan.rank].to(x.dtype)\n"
            "    a = (x[None, :, :, None] * w1[:, None]).sum(2)  # (E, T, h), no matmul\n"
            "    b = (x[None, :, :, None] * w3[:, None]).sum(2)  # (E, T, h)\n"
            "    out = ((F.silu(a) * b)[..., None] * w2[:, None]).sum(2)  # (E, T, d)\n"
            "    return (out * gates.T[..., None]).sum(0)  # (T, d)\n"
        ),
    ),
]
