"""Bug: a sequence's tokens are the caller's prompt list itself, not a copy.

Every generated token is appended to `requests[i].prompt`: the caller's requests grow with each
step, and the completion, sliced after the prompt's (now longer) length, comes back short.
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EDITS = [
    (
        "    seqs = [_Sequence(r, i, list(r.prompt)) for i, r in enumerate(requests)]\n",
        "    seqs = [_Sequence(r, i, r.prompt) for i, r in enumerate(requests)]\n",
    ),
]
