"""Bug: a preempted request starts again from scratch: its tokens and its first_token reset.

Treating a preempted request as a new one is the shortest code; greedy decoding even gives the
same tokens back. But it throws away what the customer already received: the recompute should
feed the prompt and every token generated so far in one prefill, and first_token is history.
"""

CAUGHT_BY = ["test_kv_blocks_are_never_over_committed_and_preemption_is_exact"]
EDITS = [
    (
        "victim.cache = None  # its progress is recomputed from prompt + tokens so far",
        "victim.cache, victim.generated, victim.first_token = None, [], None",
    ),
]
