"""Bug: a stopped request leaves the batch at once, but its blocks go back to the pool only at
the end of the next step, after that step's admissions.

The sweep of finished requests handles max_new_tokens; stopped requests are put aside and
released with the next step's bookkeeping. The tokens stay right, but a request waiting for
those blocks joins a step late (and the step between may run nothing at all).
"""

CAUGHT_BY = ["test_a_stopped_request_hands_its_blocks_back_in_the_step_it_stops"]
EDITS = [
    (
        "    now = 0\n    while arrivals or waiting or running:\n",
        "    now, stopped = 0, []  # stopped: released at the end of the next step\n"
        "    while arrivals or waiting or running:\n",
    ),
    (
        "        engine.step(batch, now)\n"
        "        for seq in [s for s in running if s.done]:  # they leave at once\n"
        "            running.remove(seq)\n"
        "            engine.release(seq)\n",
        "        if batch:\n"
        "            engine.step(batch, now)\n"
        "        for seq in stopped:\n"
        "            engine.release(seq)\n"
        "        stopped = [s for s in running if s.stopped]\n"
        "        for seq in [s for s in running if s.done]:  # they leave at once\n"
        "            running.remove(seq)\n"
        "            if not seq.stopped:\n"
        "                engine.release(seq)\n",
    ),
]
