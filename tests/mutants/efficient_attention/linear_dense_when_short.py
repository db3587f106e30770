"""Bug: linear attention uses the quadratic form phi(Q) phi(K)ᵀ for sequences up to 1024 tokens.

For short sequences the N x N form is simpler and quick enough, so it is tempting to keep it;
but the kata's promise is no N x N tensor at any length.
"""

CAUGHT_BY = [
    "test_linear_attention_cost_is_linear_in_n",
]
EDITS = [
    (
        ("    if not causal:\n        S = fk.transpose(-1, -2) @ v"),
        (
            "    if causal and Nq == Nk <= 1024:  # short: the quadratic form\n"
            "        A = (fq @ fk.transpose(-1, -2)).tril()  # (B, H, N, N)\n"
            "        return ((A @ v) / A.sum(dim=-1, keepdim=True)).to(q.dtype)\n"
            "    if not causal:\n"
            "        S = fk.transpose(-1, -2) @ v"
        ),
    ),
]
