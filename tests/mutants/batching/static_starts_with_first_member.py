"""Bug: a static group starts when its first member arrives, not its last.

Starting "as soon as the group has someone" confuses the group's start with the queue's; the
members that have not arrived are then served before their arrival.
"""

CAUGHT_BY = ["test_static_groups_are_exactly_as_defined"]
EDITS = [
    (
        "step = max(step, max(s.request.arrival for s in group))",
        "step = max(step, min(s.request.arrival for s in group))",
    ),
]
