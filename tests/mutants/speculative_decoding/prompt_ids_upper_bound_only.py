"""Bug: prompt ids are checked against vocab_size only from above; a negative id gets through.

A negative id then reaches the model's embedding, which fails with an IndexError deep inside
(or, with an index that wraps, reads another token's row without a word).
"""

CAUGHT_BY = ["test_a_prompt_token_outside_the_vocabulary_raises_value_error"]
EDITS = [
    (
        "    if ((prompt_ids < 0) | (prompt_ids >= V)).any():\n",
        "    if (prompt_ids >= V).any():\n",
    ),
]
