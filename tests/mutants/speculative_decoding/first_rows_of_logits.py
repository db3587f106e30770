"""Bug: the verifying rows are taken from the start of the target's call, not its end.

After the first round the target reads one pending token plus the proposals, so the first
k + 1 rows are the right ones; in the first round it also reads the prompt, and the proposals
are checked against the prompt's rows.
"""

CAUGHT_BY = ["test_greedy_output_is_the_targets_own_greedy_decoding"]
EDITS = [
    (
        "logits = target(unread, target_cache)[0, -(k_round + 1) :]",
        "logits = target(unread, target_cache)[0, : k_round + 1]",
    ),
]
