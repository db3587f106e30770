"""Bug: accept_reject does not check that the draft tokens lie in the vocabulary.

A draft token of -1 is read by p[i, -1] and q[i, -1] as the last token of the vocabulary: the
call returns an answer for a token that does not exist instead of refusing it.
"""

CAUGHT_BY = ["test_accept_bad_input_raises_value_error"]
EDITS = [
    (
        "    if ((draft_tokens < 0) | (draft_tokens >= V)).any():\n",
        "    if False:\n",
    ),
]
