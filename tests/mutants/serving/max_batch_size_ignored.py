"""Bug: every arrived request joins at once, whatever max_batch_size says.

With kv_blocks as the only limit in mind, the row limit is easy to forget; calls then feed
more rows than the batch may hold.
"""

CAUGHT_BY = ["test_serve_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "        while waiting and len(running) < max_batch_size and budget > 0:\n",
        "        while waiting and budget > 0:\n",
    )
]
