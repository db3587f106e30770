"""Bug: linear_attention_step replaces S and z with the new token's terms instead of adding them.

`S = phi(k) vᵀ` instead of `S = S + phi(k) vᵀ`: each step forgets the past and attends to its
own token only.
"""

CAUGHT_BY = [
    "test_linear_attention_step_worked_example",
    "test_linear_attention_steps_match_parallel_form_and_carry_on",
]
EDITS = [
    (
        "    S = S + fk[..., :, None] * v_t[..., None, :]",
        "    S = fk[..., :, None] * v_t[..., None, :]",
    ),
    (
        "    z = z + fk\n",
        "    z = fk\n",
    ),
]
