"""Cheat: a dense rotation matrix applied with torch.prod instead of multiplications.

Each output column is `prod(stack([x, row]), 0).sum(-1)`: D products per element of x, where
RoPE needs 2, written as a product reduction the multiplication count used to leave out. Caught
because `torch.prod` (and `torch.cumprod`) of n elements counts as n multiplications.
"""

KATA = "context_extension"
TESTS = ["test_apply_rope_is_elementwise"]
EXPECT = "multiplications for x of"
REPLACE = {
    "apply_rope": """
        def apply_rope(x, cos, sin):
            if x.dim() < 2 or not x.dtype.is_floating_point:
                raise ValueError(f"x: expected a float tensor [..., N, D], got {list(x.shape)}")
            N, D = x.shape[-2:]
            if D % 2:
                raise ValueError(f"x: the last dimension (head_dim) must be even, got {D}")
            for name, table in (("cos", cos), ("sin", sin)):
                if tuple(table.shape) != (N, D):
                    raise ValueError(f"{name}: expected shape [N, D], got {list(table.shape)}")
            compute = torch.promote_types(x.dtype, torch.float32)
            xc, c, s = x.to(compute), cos.to(compute), sin.to(compute)
            h, columns = D // 2, []
            for j in range(D):  # column j of the rotation, as a row per position
                row = torch.zeros(N, D, dtype=compute)
                row[:, j] = c[:, j]
                if j < h:
                    row[:, j + h] = -s[:, j]
                else:
                    row[:, j - h] = s[:, j]
                columns.append(torch.prod(torch.stack([xc, row.expand_as(xc)]), 0).sum(-1))
            return torch.stack(columns, -1).to(x.dtype)
    """,
}
