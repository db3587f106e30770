"""Bug: the requests that finished in a step still count against max_batch_size when the next
step admits, so a waiting request joins one step after a row frees.

Every token is right and nobody exceeds the batch; only the schedule is late, and only when the
batch is full while requests wait.
"""

CAUGHT_BY = ["test_a_waiting_request_joins_in_the_step_a_row_frees"]
EDITS = [
    (
        "    now = 0\n    while arrivals or waiting or running:\n",
        "    now, leaving = 0, []  # leaving: the requests that finished in the step before\n"
        "    while arrivals or waiting or running:\n",
    ),
    (
        "        while waiting and len(running) < max_batch_size and budget > 0:\n",
        "        while waiting and len(running) + len(leaving) < max_batch_size and budget > 0:\n",
    ),
    (
        "        for seq in [s for s in running if s.done]:  # they leave at once\n",
        "        leaving = [s for s in running if s.done]  # counted until the next admission\n"
        "        for seq in leaving:\n",
    ),
]
