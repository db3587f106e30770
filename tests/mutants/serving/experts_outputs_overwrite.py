"""Bug: expert outputs are written back to their tokens with an assignment, not an add.

`y[plan.token] = ...` looks like the inverse of the gather; but a token appears in k groups, and
with a plain assignment only one of its experts' outputs survives.
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
            w = weights.to(wide)[plan.token, plan.rank]  # (A,)
            y = torch.zeros(x.shape, dtype=wide)
            y[plan.token] = out.to(wide) * w[:, None]  # the last write wins
            return y.to(x.dtype)
    """,
}
