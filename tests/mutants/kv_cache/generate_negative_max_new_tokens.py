"""Bug: generate treats a negative max_new_tokens like zero and returns the prompt.

`if max_new_tokens <= 0: return prompt` is a tidy early exit, but it hides a caller's bug (a
length computed the wrong way round) instead of reporting it.
"""

CAUGHT_BY = ["test_generate_bad_input_raises_value_error"]
EDITS = [
    (
        "    if max_new_tokens < 0:\n"
        '        raise ValueError(f"max_new_tokens: expected an int >= 0, '
        'got {max_new_tokens!r}")\n',
        "",
    ),
    (
        "    if max_new_tokens == 0:\n        return prompt_ids.clone()\n",
        "    if max_new_tokens <= 0:\n        return prompt_ids.clone()\n",
    ),
]
