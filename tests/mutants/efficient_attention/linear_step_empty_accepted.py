"""Bug: linear_attention_step accepts q_t, k_t or v_t with a size 0.

The parallel form rejects empty tensors, but the step only checks that its inputs are 3-D: a
batch of 0 returns an empty output, and no kv heads fails deep inside with a ZeroDivisionError
instead of a ValueError that names the argument.
"""

CAUGHT_BY = ["test_linear_attention_bad_input_raises_value_error"]
EDITS = [
    (
        "        if t.numel() == 0:\n"
        '            raise ValueError(f"{name} must be a non-empty [B, heads, D], '
        'got {tuple(t.shape)}")\n'
        "    B, H, D = q_t.shape\n"
        "    Hkv, Dv = k_t.shape[1], v_t.shape[2]\n",
        "    B, H, D = q_t.shape\n    Hkv, Dv = k_t.shape[1], v_t.shape[2]\n",
    ),
]
