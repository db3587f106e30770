"""Bug: every input is turned into float32, and only float16/bfloat16 outputs are cast back.

"The arithmetic runs in float32", so `.float()` on every input looks right, and the outputs of
float32, float16 and bfloat16 inputs come back in their dtype. float64 inputs come back as
float32: the output no longer has q's dtype, and the caller's float64 precision is gone.
"""

CAUGHT_BY = [
    "test_sliding_window_float64_inputs_give_float64_outputs",
    "test_block_sparse_float64_inputs_give_float64_outputs",
    "test_linear_attention_float64_inputs_give_float64_outputs",
    "test_decoding_float64_inputs_give_float64_outputs",
]
EDITS = [
    (
        "    return torch.promote_types(dtype, torch.float32)  # float32, or float64 for float64 "
        "inputs\n",
        "    return torch.float32\n\n\n"
        "def _output_dtype(dtype: torch.dtype) -> torch.dtype:\n"
        "    return dtype if dtype in (torch.float16, torch.bfloat16) else torch.float32\n",
    ),
    (
        "    return out.flatten(2, 3)[:, :, :Nq].to(q.dtype)\n",
        "    return out.flatten(2, 3)[:, :, :Nq].to(_output_dtype(q.dtype))\n",
    ),
    (
        "    return out.flatten(2, 3)[:, :, :N].to(q.dtype)\n",
        "    return out.flatten(2, 3)[:, :, :N].to(_output_dtype(q.dtype))\n",
    ),
    ("        return out.to(q.dtype)\n", "        return out.to(_output_dtype(q.dtype))\n"),
    (
        "    return F.pad(out, (0, 0, Nq - n, 0)).to(q.dtype)  # (B, H, Nq, Dv)\n",
        "    return F.pad(out, (0, 0, Nq - n, 0)).to(_output_dtype(q.dtype))  # (B, H, Nq, Dv)\n",
    ),
    (
        "    return o_t.to(q_t.dtype), (S, z)\n",
        "    return o_t.to(_output_dtype(q_t.dtype)), (S, z)\n",
    ),
    (
        "    return o_t.to(q_t.dtype)\n",
        "    return o_t.to(_output_dtype(q_t.dtype))\n",
    ),
]
