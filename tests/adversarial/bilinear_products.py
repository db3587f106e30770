"""Cheat: the expert's matrix products written as bilinear forms, which PyTorch prices at zero.

`F.bilinear(x, ones, w.T[..., None])` is `x @ w` computed by `aten._trilinear`, an operator
PyTorch's FLOP formulas leave out, so running every assignment, the dropped ones too, and then
zeroing what capacity dropped looks free to a FLOP bound. Caught because the counters price
`_trilinear` as the products it computes.
"""

KATA = "moe"
TESTS = ["test_dropped_assignments_cost_nothing"]
EXPECT = "moe_forward spent"
REPLACE = {
    "moe_forward": """
        def moe_forward(x, gate_w, w1, w3, w2, k, capacity_factor=None):
            _check_layer(x, gate_w, w1, w3, w2)
            T, E = x.shape[0], gate_w.shape[0]
            weights, experts = route(x.float() @ gate_w.float().T, k)  # (T, k)
            capacity = None
            if capacity_factor is not None:
                capacity = expert_capacity(T, k, E, capacity_factor)
            plan = plan_dispatch(experts, E)  # every assignment, the dropped ones too
            grouped = dispatch(x, plan)  # (T·k, d)

            def product(a, w):  # a @ w as a bilinear form, (n, p) x (p, q) -> (n, q)
                ones = torch.ones(a.shape[0], 1, dtype=a.dtype)
                return F.bilinear(a, ones, w.T.unsqueeze(-1))

            outs, start = [], 0
            for e, count in enumerate(plan.counts.tolist()):
                rows = grouped[start : start + count]
                out = product(F.silu(product(rows, w1[e])) * product(rows, w3[e]), w2[e])
                if capacity is not None:  # zero the assignments capacity drops
                    out = out * (torch.arange(count) < capacity).to(out.dtype)[:, None]
                outs.append(out)
                start += count
            return combine(torch.cat(outs), weights, plan, T)
    """,
}
