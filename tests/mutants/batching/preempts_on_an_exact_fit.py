"""Bug: a running request preempts when the blocks it needs equal the blocks free.

`needed >= free` instead of `needed > free` reads as "memory is full", but taking the last free
block is a fit. Alone in a pool sized for it, a request preempts itself when it reaches its last
block, rejoins, recomputes, and preempts again at every step after.
"""

CAUGHT_BY = ["test_a_pool_that_fits_exactly_is_never_preempted"]
EDITS = [
    (
        "while not pool.can_grow(seq, n):",
        "while pool.blocks(seq.cached + n) - pool.held.get(id(seq), 0) >= pool.free:",
    ),
]
