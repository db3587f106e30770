"""Cheat: every expert on every token, its matrix products written as weighted embedding bags.

`F.embedding_bag(indices, w, offsets, mode="sum", per_sample_weights=a)` sums rows of `w`
weighted by `a`: that is `a @ w`, computed by `aten._embedding_bag`, an operator PyTorch's FLOP
formulas leave out. The dense layer then looks as cheap as the grouped one to a FLOP bound.
Caught because the counters price `_embedding_bag` as the products it computes.
"""

KATA = "moe"
TESTS = ["test_expert_work_grows_with_k_not_with_E"]
EXPECT = "over budget: moe_forward"
REPLACE = {
    "moe_forward": """
        def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None):
            _check_layer(x, gate_w, w1, w3, w2)
            T, E = x.shape[0], gate_w.shape[0]
            weights, experts = route(x.float() @ gate_w.float().T, k)  # (T, k)

            def product(a, w):  # a @ w as weighted bags, (n, p) x (p, q) -> (n, q)
                n, p = a.shape
                indices = torch.arange(p).repeat(n)
                offsets = torch.arange(n) * p
                return F.embedding_bag(
                    indices, w, offsets, mode="sum", per_sample_weights=a.reshape(-1)
                )

            y = torch.zeros_like(x)
            for e in range(E):  # every expert on every token
                out = product(F.silu(product(x, w1[e])) * product(x, w3[e]), w2[e])
                gate = (weights * (experts == e)).sum(dim=-1, keepdim=True).to(x.dtype)
                y = y + gate * out
            return y
    """,
}
