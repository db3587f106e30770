"""Bug: each row attends over every slot of its blocks, the unwritten end of the last one too.

Reading `k[layer, table]` whole is the simple gather; slots past the row's length hold zeros or
an earlier owner's keys, and they take a share of the softmax.
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
EDITS = [
    (
        "                L = start + T\n",
        "                L = len(table) * bs\n",
    ),
]
