"""Bug: the draft always proposes k tokens, and the surplus is cut off after verification.

Trimming the kept tokens to max_new_tokens keeps the answers right, so proposing a full k looks
harmless; but near the end those proposals can never be kept, the target verifies them anyway,
and they need KV blocks the request was never promised.
"""

CAUGHT_BY = ["test_speculative_serve_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "            seq.propose = min(self.k, left - 1, budget - seq.feed)\n",
        "            seq.propose = min(self.k, budget - seq.feed)\n",
    ),
    (
        "            seq.tokens += proposed[seq][:j] + [best[j]]\n",
        "            left = seq.request.max_new_tokens - seq.generated\n"
        "            seq.tokens += (proposed[seq][:j] + [best[j]])[:left]\n",
    ),
]
