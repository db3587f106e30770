"""Bug: a request's first_token is the step of its first chunk, not of its last.

"The step it was first served" and "the step its first token came out" are the same step without
chunking. With a long prompt fed over several steps, no token comes out until the call that
feeds its last chunk, and time to first token is measured to that call.
"""

CAUGHT_BY = ["test_a_long_prompt_alone_is_fed_in_chunks", "test_with_room_no_budget_is_left_unused"]
EDITS = [
    (
        "                seq.cached += seq.feed\n",
        "                seq.cached += seq.feed\n"
        "                if seq.first_token is None:\n"
        "                    seq.first_token = now  # served, so started\n",
    ),
]
