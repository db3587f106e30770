"""Bug: expert_mlp upcasts float16/bfloat16 x and weights to float32 and casts the result back.

It looks more accurate, but the README computes one expert in x's dtype: x @ w3 is rounded to
x's dtype before the gated product, and the upcast result differs from that (it also copies all
3·d·h weights of the expert on every call).
"""

CAUGHT_BY = ["test_expert_mlp_computes_in_x_dtype"]
EDITS = [
    (
        "    return (F.silu(x @ w1) * (x @ w3)) @ w2  # (n, h) -> (n, d)",
        "    if x.dtype in (torch.float16, torch.bfloat16):\n"
        "        xf, a, b, c = x.float(), w1.float(), w3.float(), w2.float()\n"
        "        return ((F.silu(xf @ a) * (xf @ b)) @ c).to(x.dtype)\n"
        "    return (F.silu(x @ w1) * (x @ w3)) @ w2  # (n, h) -> (n, d)",
    ),
]
