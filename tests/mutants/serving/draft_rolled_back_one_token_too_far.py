"""Bug: after each round the draft rolls back one token further than the rejected proposals.

An off-by-one between "tokens" and "positions to keep" is easy to make, and it costs no token:
the draft re-reads the newest committed token every round and proposes the same tokens. Only
counting what the draft reads shows the waste.
"""

CAUGHT_BY = ["test_the_draft_reads_each_committed_token_once"]
EDITS = [
    (
        "seq.draft_cached = min(seq.draft_cached, len(seq.tokens) - 1)",
        "seq.draft_cached = min(seq.draft_cached, len(seq.tokens) - 2)",
    ),
]
