"""Bug: giving a sequence's blocks back puts them on the free list but leaves them in its table.

Freeing feels done once the pool has the blocks again; but the sequence still writes and reads
through its old table, so a preempted request that rejoins shares blocks with whoever got them
next, and each overwrites the other's keys.
"""

CAUGHT_BY = [
    "test_a_preempted_request_rejoins_with_every_token_it_had",
    "test_serve_tokens_equal_naive_serve_within_every_budget",
]
EDITS = [("        del seq.blocks[kept:]\n", "")]
