"""Bug: the layer runs each float16 or bfloat16 expert on float32 copies of x and its weights.

More accurate, but not the layer asked for: each expert runs in x's dtype, as expert_mlp does,
and a float32 copy keeps the 1 + eps that x's dtype rounds away.
"""

CAUGHT_BY = ["test_moe_forward_runs_its_experts_in_x_dtype"]
EDITS = [
    (
        "out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])",
        "if x.dtype in (torch.float16, torch.bfloat16):\n"
        "                out[rows] = expert_mlp(\n"
        "                    grouped[rows].float(), w1[e].float(), w3[e].float(), w2[e].float()\n"
        "                ).to(x.dtype)\n"
        "            else:\n"
        "                out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])",
    ),
]
