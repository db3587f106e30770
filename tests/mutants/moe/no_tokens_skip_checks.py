"""Bug: expert_capacity returns 0 for no tokens before checking its other arguments.

"0 when T = 0" read as a shortcut at the top: expert_capacity(0, 1, 3, nan) returns 0 where the
README asks for a ValueError naming capacity_factor (an empty batch is checked like any other).
"""

CAUGHT_BY = ["test_bad_plan_input_raises_value_error"]
EDITS = [
    (
        '        raise ValueError(f"num_tokens: expected an int >= 0, got {num_tokens!r}")\n',
        '        raise ValueError(f"num_tokens: expected an int >= 0, got {num_tokens!r}")\n'
        "    if num_tokens == 0:\n        return 0\n",
    ),
]
