"""Bug: a preempted request forgets the tokens it had generated and decodes them all again.

Resetting the whole request on preemption looks clean, and greedy decoding even gives the same
tokens back; but the recompute should be one prefill of prompt + generated tokens, not a replay
of every decode step, one row per step, while other requests wait.
"""

CAUGHT_BY = ["test_a_preempted_request_rejoins_with_every_token_it_had"]
EDITS = [
    (
        "                engine.release(victim)\n",
        "                engine.release(victim)\n"
        "                victim.tokens = list(victim.request.prompt)\n",
    ),
]
