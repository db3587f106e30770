"""Bug: every expert runs on every token; the unchosen ones are multiplied by a zero weight.

The numbers are right, which is why it is tempting: it is the textbook formula
Σ_e g_e(x) · expert_e(x) written directly, and it costs E / k times the work.
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
            "    gates = torch.zeros(T, E)  # (T, E): kept weights, 0 elsewhere\n"
            "    chosen = experts[plan.token, plan.rank]\n"
            "    gates[plan.token, chosen] = weights[plan.token, plan.rank]\n"
            "    y = torch.zeros(T, x.shape[1])\n"
            "    for e in range(E):  # all T tokens through every expert\n"
            "        y += gates[:, e, None] * expert_mlp(x, w1[e], w3[e], w2[e]).float()\n"
            "    return y.to(x.dtype)\n"
        ),
    ),
]
