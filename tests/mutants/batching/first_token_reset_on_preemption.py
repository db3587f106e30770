"""Bug: after a preemption, first_token reports the step of the recompute.

Resetting every per-request field on preemption makes the recompute look like a first answer;
the customer got the first token long before, and time to first token must say so.
"""

CAUGHT_BY = ["test_kv_blocks_are_never_over_committed_and_preemption_is_exact"]
EDITS = [
    (
        "victim.cache = None  # its progress is recomputed from prompt + tokens so far",
        "victim.cache, victim.first_token = None, None",
    ),
]
