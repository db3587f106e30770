"""Bug: generate passes token ids outside the vocabulary straight to the model.

The embedding lookup then fails with an IndexError deep inside the model (or, on a GPU, a device
assert), instead of a ValueError that names prompt_ids.
"""

CAUGHT_BY = ["test_generate_bad_input_raises_value_error"]
EDITS = [
    (
        "    low, high = int(prompt_ids.min()), int(prompt_ids.max())\n"
        "    if low < 0 or high >= c.vocab_size:\n"
        "        raise ValueError(\n"
        '            f"prompt_ids: token ids must lie in 0..{c.vocab_size - 1}, '
        'got {low}..{high}"\n'
        "        )\n",
        "",
    ),
]
