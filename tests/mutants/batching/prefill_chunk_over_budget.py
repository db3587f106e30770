"""Bug: a joining request's whole prompt goes in, whatever is left of the token budget.

Chunking only the prompts of requests already running, and letting a newcomer prefill in one
piece, lets a single long prompt blow the step's budget: the stall chunked prefill is there to
prevent.
"""

CAUGHT_BY = ["test_chunked_prefill_is_exact_and_stays_within_the_budget"]
EDITS = [
    (
        "            seq = waiting[0]\n            n = min(len(seq.pending), budget)",
        "            seq = waiting[0]\n            n = len(seq.pending)",
    ),
]
