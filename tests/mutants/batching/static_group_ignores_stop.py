"""Bug: a static or dynamic group keeps feeding a member that has stopped, until max_new_tokens.

The group loop is written `while any(len(m.tokens) < m.max_new_tokens ...)`, feeding every
member short of its length, while only continuous batching was taught about stop tokens: a
stopped member is fed its stop token and goes on generating past it, and the group runs as long
as if nobody had stopped.
"""

CAUGHT_BY = [
    "test_static_groups_end_when_every_member_is_done",
    "test_dynamic_batches_end_when_every_member_is_done",
]
EDITS = [
    (
        "    while not all(s.done for s in group):\n"
        "        _run_step(model, [(s, len(s.pending)) for s in group if not s.done], step)\n",
        "    short = [s for s in group if len(s.generated) < s.request.max_new_tokens]\n"
        "    while short:\n"
        "        _run_step(model, [(s, len(s.pending)) for s in short], step)\n"
        "        short = [s for s in group if len(s.generated) < s.request.max_new_tokens]\n",
    ),
]
