"""Bug: every expert output is weighted with the token's first routing weight.

Indexing the weights by token alone (`weights[plan.token, 0]`) forgets that a token sits in k
groups with k different weights; its second expert then counts as much as its first.
"""

CAUGHT_BY = ["test_moe_feed_forward_equals_every_expert_on_every_token"]
REPLACE = {
    "moe_feed_forward": """
        def moe_feed_forward(moe, x):
            from reference.moe import dispatch, expert_mlp, plan_dispatch, route

            gate_w, w1, w3, w2 = _expert_weights(moe)
            weights, experts = route(x.float() @ gate_w.float().T, moe.top_k)  # (N, k)
            plan = plan_dispatch(experts, gate_w.shape[0])
            grouped = dispatch(x, plan)  # (A, d)
            out = torch.empty_like(grouped)
            start = 0
            for e, count in enumerate(plan.counts.tolist()):
                rows = slice(start, start + count)
                out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])
                start += count
            wide = torch.promote_types(x.dtype, torch.float32)
            w = weights.to(wide)[plan.token, 0]  # (A,)
            y = torch.zeros(x.shape, dtype=wide)
            y.index_add_(0, plan.token, out.to(wide) * w[:, None])
            return y.to(x.dtype)
    """,
}
