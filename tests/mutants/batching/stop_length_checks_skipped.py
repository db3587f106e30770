"""Bug: a request that names stop tokens skips the length and block checks.

"It will stop early, so max_new_tokens is only a cap" sounds safe, but a stop token may never
come: such a request runs past the model's context or needs more blocks than the pool has.
The checks count max_new_tokens whatever `stop` says.
"""

CAUGHT_BY = ["test_lengths_are_checked_for_max_new_tokens_whatever_stop_says"]
EDITS = [
    (
        "        if len(r.prompt) + r.max_new_tokens - 1 > config.max_seq_len:\n",
        "        if not r.stop and len(r.prompt) + r.max_new_tokens - 1 > config.max_seq_len:\n",
    ),
    (
        "        if kv_blocks is not None and need > kv_blocks:\n",
        "        if kv_blocks is not None and need > kv_blocks and not s.request.stop:\n",
    ),
]
