"""Bug: a preempted request forgets the tokens it had generated and decodes them all again.

Resetting the whole request state on preemption looks clean, and greedy decoding even gives the
same tokens back; but the recompute should be one prefill of prompt + generated tokens, not a
slow replay of every decode step while the budget sits unused.
"""

CAUGHT_BY = ["test_kv_blocks_are_never_over_committed_and_preemption_is_exact"]
EDITS = [
    (
        "victim.cache = None  # its progress is recomputed from prompt + tokens so far",
        "victim.cache, victim.generated = None, []",
    ),
]
