"""Bug: a finished request stays in the batch for one more step and is fed its last token.

Removing finished requests at the top of the next step, after that step's batch is formed, is
an easy ordering slip: the tokens stay right (the extra output is dropped), but every request
costs one more row, the last token's keys are computed for nothing, and a slot stays taken.
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EDITS = [
    (
        "            m = len(proposed[seq])\n",
        "            if seq.done:\n                continue\n            m = len(proposed[seq])\n",
    ),
    (
        "for seq in [s for s in running if s.done]:  # they leave at once",
        "for seq in [s for s in running if s.done and s.finished < now]:",
    ),
]
