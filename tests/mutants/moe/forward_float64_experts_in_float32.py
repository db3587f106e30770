"""Bug: for float64 x the layer runs the experts on float32 copies.

"The router is float32 anyway", so the whole layer is taken to be float32 precision; but the
router only picks experts and weights, while the experts must run in x's dtype, float64 too.
"""

CAUGHT_BY = ["test_moe_forward_runs_its_experts_in_x_dtype"]
EDITS = [
    (
        "out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])",
        "if x.dtype == torch.float64:\n"
        "                out[rows] = expert_mlp(\n"
        "                    grouped[rows].float(), w1[e].float(), w3[e].float(), w2[e].float()\n"
        "                ).double()\n"
        "            else:\n"
        "                out[rows] = expert_mlp(grouped[rows], w1[e], w3[e], w2[e])",
    ),
]
