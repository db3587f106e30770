"""Bug: a request that names stop tokens skips the length and block checks.

"It will stop early, so max_new_tokens is only a cap" sounds safe, but a stop token may never
come: such a request runs past the model's context or needs more blocks than the pool has, and
fails in the middle of serving everybody else instead of being refused up front.
"""

CAUGHT_BY = ["test_lengths_are_checked_for_max_new_tokens_whatever_stop_says"]
EDITS = [
    (
        "        total = len(r.prompt) + r.max_new_tokens - 1  # the last new token is never fed\n",
        "        if r.stop:  # it will stop early: max_new_tokens is only a cap\n"
        "            continue\n"
        "        total = len(r.prompt) + r.max_new_tokens - 1  # the last new token is never fed\n",
    ),
]
