"""Bug: the draft's cache is rolled back to nothing after every round.

Starting the draft afresh each round is the easy way to never hold a rejected proposal's keys,
and the proposals are right; but the draft then re-reads the whole sequence every step, and
its cost grows with the context instead of with the proposals.
"""

CAUGHT_BY = ["test_the_draft_reads_each_committed_token_once"]
EDITS = [
    (
        "            seq.draft_cached = min(seq.draft_cached, len(seq.tokens) - 1)\n",
        "            seq.draft_cached = 0\n",
    ),
]
