"""Bug: a step in which a request was preempted admits nobody from the queue.

Treating a preemption as "memory is tight, stop for this step" feels prudent, but the rule is
"as soon as": the blocks the victim freed may let the head of the queue (the victim itself too)
join in that same step, and a slot, budget and blocks left idle while a request waits break
continuous batching.
"""

CAUGHT_BY = ["test_a_preemption_step_still_admits_whoever_fits"]
EDITS = [
    (
        "        batch, budget = [], budget_per_step\n",
        "        batch, budget, preempted = [], budget_per_step, False\n",
    ),
    (
        "                victim = running.pop()\n",
        "                victim = running.pop()\n                preempted = True\n",
    ),
    (
        "        while waiting and len(running) < max_batch_size and budget > 0:",
        "        while not preempted and waiting and len(running) < max_batch_size and budget > 0:",
    ),
]
