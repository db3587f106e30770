"""Cheat: the target also runs through its private `_run`, which its call log never sees.

Every logged call follows the schedule, so a test that reads `model.calls` sees the allowed
calls; the extra work (here the whole sequence again, without a cache) is free. Caught because
the shared model's log is checked against the products that really ran through its weights
(grading/judge/audit.py): its output head multiplied more rows than the log records.
"""

KATA = "speculative_decoding"
TESTS = ["test_a_copy_of_the_target_is_always_accepted"]
EXPECT = "model log: the target's weight"
EDITS = [
    (
        "        logits = target(unread, target_cache)[0, -(k_round + 1) :]  # (k_round + 1, V)\n",
        "        logits = target(unread, target_cache)[0, -(k_round + 1) :]  # (k_round + 1, V)\n"
        "        target._run(out[:, : n + k_round], None)  # unlogged: the whole sequence again\n",
    ),
]
