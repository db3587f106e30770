"""Bug: only a request's first join looks up the cached blocks; a rejoin after a preemption
recomputes everything from position 0.

A preempted request "lost its cache", so starting over from scratch feels right. But the blocks it
let go keep their contents and keys until the pool needs them, and its own prompt's blocks, or
those it shares with others, are often still there: looked up like any join, its row feeds only
the tokens past them.
"""

CAUGHT_BY = ["test_a_preempted_request_rejoins_over_the_blocks_it_left"]
EDITS = [
    (
        "        blocks, keys = self.cached_run(seq)\n",
        "        blocks, keys = self.cached_run(seq) if not seq.generated else ([], [])\n",
    ),
]
