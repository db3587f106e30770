"""Bug: a preempted request's first_token is reset, so it reports the step it rejoined.

Clearing every per-request field on preemption makes the recompute look like a first answer;
the customer had the first token long before, and time to first token must say so.
"""

CAUGHT_BY = ["test_a_preempted_request_rejoins_with_every_token_it_had"]
EDITS = [
    (
        "                engine.release(victim)\n",
        "                engine.release(victim)\n                victim.first_token = None\n",
    ),
]
