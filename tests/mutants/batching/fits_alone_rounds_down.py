"""Bug: the "fits in kv_blocks alone" check counts blocks rounded down.

`tokens // block_size` is the number of *full* blocks; a request whose length is not a multiple
of the block size also needs the partly filled last one. With the floor, a request one block too
large for the pool is accepted, and it can never finish: it outgrows the pool alone.
"""

CAUGHT_BY = ["test_a_request_needs_its_last_partial_block_to_fit_alone"]
EDITS = [
    (
        "need = pool.blocks(len(s.request.prompt) + s.request.max_new_tokens - 1)",
        "need = (len(s.request.prompt) + s.request.max_new_tokens - 1) // block_size",
    ),
]
