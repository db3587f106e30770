"""Bug: a request that stops leaves its slot at once, but its KV blocks only a step later.

The cleanup frees the blocks of requests that reached max_new_tokens, and a stopped request's
blocks are swept by the next step's cleanup, after that step's admissions: the pool looks full
for a step, and a waiting request that fits in the freed blocks joins a step late.
"""

CAUGHT_BY = ["test_a_stopped_request_frees_its_blocks_at_once"]
EDITS = [
    (
        "arrivals, waiting, running = list(queue), [], []",
        "arrivals, waiting, running, late = list(queue), [], [], []",
    ),
    (
        "        _run_step(model, batch, step)\n",
        "        if batch:  # the pool may hold only stopped requests' blocks: nothing fits\n"
        "            _run_step(model, batch, step)\n"
        "        for seq in late:  # stopped in the step before: freed after this one\n"
        "            pool.release(seq)\n"
        "        late = [s for s in running\n"
        "                if s.done and len(s.generated) < s.request.max_new_tokens]\n",
    ),
    (
        "            running.remove(seq)\n            pool.release(seq)\n",
        "            running.remove(seq)\n            if seq not in late:\n"
        "                pool.release(seq)\n",
    ),
]
