"""Bug: the "fits in kv_blocks alone" check counts the last new token as cached.

prompt + max_new_tokens tokens, instead of prompt + max_new_tokens - 1: the last token comes out
of the final call and is never fed back, so it needs no KV slot. The bug refuses requests that
fit exactly.
"""

CAUGHT_BY = ["test_a_request_that_just_fits_the_pool_is_served"]
EDITS = [
    (
        "need = pool.blocks(len(s.request.prompt) + s.request.max_new_tokens - 1)",
        "need = pool.blocks(len(s.request.prompt) + s.request.max_new_tokens)",
    ),
]
