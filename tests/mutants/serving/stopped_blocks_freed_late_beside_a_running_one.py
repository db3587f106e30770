"""Bug: a stopped request leaves its row at once, but its blocks go back only after the next
step (at once only when nobody else is running).

Freeing "a step later" looks harmless when the stopped request was alone: the shortcut frees
them at once then. Beside a request that keeps running, a waiting request that needs those
blocks joins a step late.
"""

CAUGHT_BY = ["test_a_stopped_request_frees_its_blocks_while_another_runs"]
EDITS = [
    (
        "    now = 0\n    while arrivals or waiting or running:\n",
        "    now, retiring = 0, []  # stopped requests: their blocks go back after the next step\n"
        "    while arrivals or waiting or running:\n",
    ),
    (
        "        batch, budget = [], per_step\n",
        "        if not running:  # nobody else holds blocks: free them now\n"
        "            for seq in retiring:\n"
        "                engine.release(seq)\n"
        "            retiring = []\n"
        "        batch, budget = [], per_step\n",
    ),
    (
        "        engine.step(batch, now)\n"
        "        for seq in [s for s in running if s.done]:  # they leave at once\n"
        "            running.remove(seq)\n"
        "            engine.release(seq)\n",
        "        engine.step(batch, now)\n"
        "        for seq in retiring:\n"
        "            engine.release(seq)\n"
        "        retiring = [s for s in running if s.stopped]\n"
        "        for seq in [s for s in running if s.done]:  # they leave at once\n"
        "            running.remove(seq)\n"
        "            if not seq.stopped:\n"
        "                engine.release(seq)\n",
    ),
]
