"""Bug: the target gets a fresh cache every round and re-reads the whole text.

The simplest rollback of all: start over. The tokens are right, but each round costs a prefill
of everything so far, which throws away what speculative decoding saves.
"""

CAUGHT_BY = ["test_flops_stay_within_the_ideal_cached_schedule"]
EDITS = [
    (
        (
            "        unread = out[:, target_cache.seq_len : n + k_round]  # "
            "pending tokens + the proposals\n"
        ),
        (
            "        target_cache = _new_cache(target, total)\n"
            "        unread = out[:, : n + k_round]\n"
        ),
    ),
]
