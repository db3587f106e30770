"""Bug: a request's blocks are reserved for its committed tokens, not for its proposals.

The block table grows with the sequence, and proposals are not part of it yet; but the target
writes their keys before deciding, so the verifying call needs slots for them too.
"""

CAUGHT_BY = ["test_speculative_serve_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "        fed_to = seq.cached + seq.feed + seq.propose\n",
        "        fed_to = seq.cached + seq.feed\n",
    ),
]
