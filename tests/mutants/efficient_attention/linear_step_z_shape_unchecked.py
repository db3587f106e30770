"""Bug: linear_attention_step checks the shape of the state's S but not of its z.

A z of shape [B, H, 1] or [H, D] broadcasts in `z + phi(k_t)` and the step returns numbers; the
caller's mistake (a state from another model, z and S mixed up) goes unnoticed.
"""

CAUGHT_BY = ["test_linear_attention_bad_input_raises_value_error"]
EDITS = [
    (
        "        if S.shape != (B, H, D, Dv) or z.shape != (B, H, D):\n",
        "        if S.shape != (B, H, D, Dv):\n",
    ),
]
