"""Bug: apply_rope builds a (D, D) rotation per position and applies it by broadcasting.

Writing x @ R as (x[..., :, None] * R).sum(-2) avoids a matrix product, so FLOP counters score
it zero; it still does D multiplies per element and builds a tensor D times the size of x.
"""

CAUGHT_BY = ["test_apply_rope_is_elementwise"]
EDITS = [
    (
        (
            "    rotated = torch.cat([-x2, x1], dim=-1)  # (..., N, D)\n"
            "    return (xc * cos.to(compute) + rotated * sin.to(compute)).to(x.dtype)\n"
        ),
        (
            "    half = D // 2\n"
            "    eye = torch.eye(half, dtype=compute)  # (D/2, D/2)\n"
            "    c = cos[:, :half].to(compute)[:, :, None] * eye  # (N, D/2, D/2)\n"
            "    s = sin[:, :half].to(compute)[:, :, None] * eye\n"
            "    rot = torch.cat([torch.cat([c, s], -1), torch.cat([-s, c], -1)], -2)\n"
            "    return (xc[..., :, :, None] * rot).sum(-2).to(x.dtype)\n"
        ),
    ),
]
