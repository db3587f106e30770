"""Bug: apply_rope multiplies by a (D, D) rotation matrix per position: right numbers, wrong cost.

It is the textbook way to write a rotation and gives the right numbers, but it turns D elementwise
multiplies into a D x D matrix product per token and stores N x D x D numbers.
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
            "    rot = torch.zeros(N, D, D, dtype=compute)  # (N, D, D)\n"
            "    idx = torch.arange(half)\n"
            "    c, s = cos[:, :half].to(compute), sin[:, :half].to(compute)\n"
            "    rot[:, idx, idx] = c\n"
            "    rot[:, idx + half, idx + half] = c\n"
            "    rot[:, idx + half, idx] = -s\n"
            "    rot[:, idx, idx + half] = s\n"
            "    return (xc.unsqueeze(-2) @ rot).squeeze(-2).to(x.dtype)\n"
        ),
    ),
]
