"""Bug: the draft's proposals are planned first, and the chunk gets what is left of the budget.

Proposals are cheap tokens that may save whole steps, so reserving their room first feels like
the fast choice. But a row fed only a chunk gets no proposals at all (there is no token to
propose after yet), and the README's order is the pending tokens first: min(pending, budget),
then proposals within what is left. Reserving their room cuts every chunk short.
"""

CAUGHT_BY = ["test_a_long_prompt_alone_gets_proposals_only_with_its_last_chunk"]
EDITS = [
    (
        "        seq.feed = min(seq.pending, budget)\n",
        "        room = budget - (min(self.k, seq.request.max_new_tokens - seq.generated - 1)\n"
        "                         if self.draft is not None else 0)\n"
        "        seq.feed = min(seq.pending, max(room, 1))\n",
    ),
]
