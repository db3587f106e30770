"""Bug: each expert runs on a slice of x in token order instead of the grouped tokens.

Computing the group sizes and then slicing `x[start:start + count]` skips the dispatch (the
gather into expert order): every expert sees the right number of tokens, but the wrong ones.
"""

CAUGHT_BY = ["test_moe_feed_forward_equals_every_expert_on_every_token"]
REPLACE = {
    "moe_feed_forward": """
        def moe_feed_forward(moe, x):
            from reference.moe import combine, expert_mlp, plan_dispatch, route

            gate_w, w1, w3, w2 = _expert_weights(moe)
            weights, experts = route(x.float() @ gate_w.float().T, moe.top_k)  # (N, k)
            plan = plan_dispatch(experts, gate_w.shape[0])
            stacked = x.repeat(moe.top_k, 1)  # (k·N, d): room for every assignment
            out = torch.empty_like(stacked)
            start = 0
            for e, count in enumerate(plan.counts.tolist()):
                rows = slice(start, start + count)
                out[rows] = expert_mlp(stacked[rows], w1[e], w3[e], w2[e])
                start += count
            return combine(out, weights, plan, x.shape[0])
    """,
}
