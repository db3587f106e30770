"""Bug: waiting requests join without checking that their blocks are free.

Checking memory only for decodes, and trusting that prompts fit, over-commits the pool whenever
a long prompt joins a busy batch.
"""

CAUGHT_BY = ["test_kv_blocks_are_never_over_committed_and_preemption_is_exact"]
EDITS = [("            if not pool.can_grow(seq, n):\n                break\n", "")]
