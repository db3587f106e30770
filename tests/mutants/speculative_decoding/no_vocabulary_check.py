"""Bug: a draft with another vocabulary is not refused.

Token ids then mean different things to the two models; the code fails somewhere deep inside with
a shape error, or worse, runs.
"""

CAUGHT_BY = ["test_greedy_bad_input_raises_value_error"]
EDITS = [
    (
        "    if draft.config.vocab_size != V:\n",
        "    if False:\n",
    ),
]
