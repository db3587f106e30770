"""Bug: `accepted` counts the leading proposals with p >= q, the ones accepted for sure.

min(1, p/q) = 1 there, so those proposals are certainly kept, and with one-hot distributions (or
a draft equal to the target) they are exactly the kept ones; but accept_reject also keeps a
proposal with p < q when its coin says so, and the count then misses it: accepted +
target_calls falls short of max_new_tokens.
"""

CAUGHT_BY = ["test_sampling_stats_count_the_rounds_taken"]
EDITS = [
    (
        "        kept = accept_reject(p, q, out[0, n : n + k_round].clone(), generator)",
        "        proposals = out[0, n : n + k_round].clone()\n"
        "        kept = accept_reject(p, q, proposals, generator)\n"
        "        steps = torch.arange(k_round)\n"
        "        sure = p[steps, proposals] >= q[steps, proposals]\n"
        "        certain = int(sure.cumprod(dim=0).sum())",
    ),
    (
        "        stats.accepted += len(kept) - 1\n",
        "        stats.accepted += min(certain, len(kept) - 1)\n",
    ),
]
