"""Bug: the target drops the keys of every proposal after a round, the accepted ones too.

Rolling the target back to where the round began is the simplest rollback, and the tokens stay
right: the accepted proposals are fed again as pending tokens next round. But the target reads
them twice, and a target call is the expensive one.
"""

CAUGHT_BY = ["test_the_draft_reads_each_committed_token_once"]
EDITS = [
    (
        "            seq.cached = len(seq.tokens) - 1\n",
        "            seq.cached = len(seq.tokens) - 1 - j\n",
    ),
]
