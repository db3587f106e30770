"""Cheat: the serving engine's feed-forward runs every expert on every token, by broadcasting.

Products written as `(x[:, None, :, None] * w[None]).sum(-2)` are elementwise multiplies and a
sum, which the FLOP formulas price at zero, so the cost test sees only the router. Caught by the
work measure (FLOPs plus every element each operator reads and writes), bounded on every call
of a function that has a cost model.
"""

KATA = "serving"
TESTS = ["test_each_expert_runs_only_on_its_tokens"]
EXPECT = "over budget: moe_feed_forward"
REPLACE = {
    "moe_feed_forward": """
        def moe_feed_forward(moe, x):
            gate_w, w1, w3, w2 = _expert_weights(moe)
            probs = torch.softmax(x.float() @ gate_w.float().T, dim=-1)  # (N, E)
            top, experts = probs.topk(moe.top_k, dim=-1)
            weights = torch.zeros_like(probs).scatter(1, experts, top / top.sum(-1, keepdim=True))
            a = (x[:, None, :, None] * w1[None]).sum(-2)  # (N, E, h): every expert, no matmul
            b = (x[:, None, :, None] * w3[None]).sum(-2)
            hidden = torch.nn.functional.silu(a) * b
            out = (hidden[..., None] * w2[None]).sum(-2)  # (N, E, d)
            return (weights[..., None].to(x.dtype) * out).sum(1)
    """,
}
