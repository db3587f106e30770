"""Bug: RoPE pairs neighbouring dimensions (2i, 2i + 1) and lays the tables out f0, f0, f1, f1.

That is the layout of the original RoFormer/GPT-J code and of Meta's complex-number Llama, so it
looks right, but Hugging Face checkpoints permute their q/k weights for the half-split layout:
with those weights, interleaved RoPE rotates the wrong pairs.
"""

CAUGHT_BY = ["test_rope_cos_sin_layout_known_values", "test_apply_rope_known_values_at_position_1"]
EDITS = [
    (
        "angles = torch.cat([angles, angles], dim=-1)",
        "angles = angles.repeat_interleave(2, dim=-1)",
    ),
    (
        (
            "    x1, x2 = xc.chunk(2, dim=-1)  # (..., N, D/2) each\n"
            "    rotated = torch.cat([-x2, x1], dim=-1)"
        ),
        (
            "    even, odd = xc[..., 0::2], xc[..., 1::2]\n"
            "    rotated = torch.stack([-odd, even], dim=-1).flatten(-2)"
        ),
    ),
]
