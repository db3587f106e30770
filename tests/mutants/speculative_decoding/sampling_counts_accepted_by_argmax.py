"""Bug: `accepted` counts the leading proposals that are the target's argmax.

That is the greedy rule, and with one-hot distributions it counts the same; but at temperature
> 0 a proposal is kept by accept_reject's coin, not by being the argmax, so the count drifts
from the proposals actually kept and accepted + target_calls no longer equals max_new_tokens.
"""

CAUGHT_BY = [
    "test_a_copy_of_the_target_is_always_accepted_when_sampling",
    "test_sampling_stats_count_the_rounds_taken",
]
EDITS = [
    (
        "        kept = accept_reject(p, q, out[0, n : n + k_round].clone(), generator)",
        "        proposals = out[0, n : n + k_round].clone()\n"
        "        kept = accept_reject(p, q, proposals, generator)\n"
        "        agree = int((proposals == p[:k_round].argmax(dim=-1)).cumprod(dim=0).sum())",
    ),
    (
        "        stats.accepted += len(kept) - 1\n",
        "        stats.accepted += agree\n",
    ),
]
