"""Bug: the top k softmax probabilities are used as weights without renormalising them.

Some mixtures (Switch) keep the raw probabilities, so leaving them as they are looks like a
choice; but this model's router renormalises the k chosen to sum to 1, and every output comes
out scaled down.
"""

CAUGHT_BY = ["test_moe_feed_forward_equals_every_expert_on_every_token"]
REPLACE = {
    "moe_feed_forward": """
        def moe_feed_forward(moe, x):
            from reference.moe import combine, dispatch, expert_mlp, plan_dispatch

            gate_w, w1, w3, w2 = _expert_weights(moe)
            probs = (x.float() @ gate_w.float().T).softmax(dim=-1)  # (N, E)
            weights, experts = probs.topk(moe.top_k, dim=-1)  # (N, k), not renormalised
            plan = plan_dispatch(experts, gate_w.shape[0])
            grouped = dispatch(x, plan)  # (A, d)
            out = torch.empty_like(grouped)
            start = 0
            for e, count in enumerate(plan.counts.tolist()):
                rows = slice(start, start + count)
                out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])
                start += count
            return combine(out, weights, plan, x.shape[0])
    """,
}
