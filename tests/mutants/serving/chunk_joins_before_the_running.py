"""Bug: waiting requests join before the running requests are given their rows.

Admitting first looks fair ("the newcomer has waited longest"), but a joining prompt then takes
the step's budget ahead of the requests already decoding, which stall for a step or more each
time a long prompt arrives: exactly the stall chunked prefill is there to avoid.
"""

CAUGHT_BY = [
    "test_with_room_no_budget_is_left_unused",
    "test_decoding_requests_keep_their_pace_while_a_long_prompt_arrives",
]
EDITS = [
    (
        "        for seq in list(running):  # the running first, oldest admitted first\n",
        "        while waiting and len(running) < max_batch_size and budget > 0:  # joins first\n"
        "            n = engine.join(waiting[0], budget)\n"
        "            if n is None:\n"
        "                break\n"
        "            running.append(waiting.pop(0))\n"
        "            batch.append(running[-1])\n"
        "            budget -= n\n"
        "        for seq in [s for s in running if s not in batch]:  # then the running\n",
    ),
]
