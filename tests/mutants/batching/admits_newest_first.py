"""Bug: free slots go to the most recent arrival instead of the one that has waited longest.

Popping from the end of the waiting list is the natural thing to do with a Python list, and the
tokens come out right; but last come, first served starves early requests and breaks the rule.
"""

CAUGHT_BY = ["test_continuous_fills_free_slots_at_once_first_come_first_served"]
EDITS = [
    ("            seq = waiting[0]\n", "            seq = waiting[-1]\n"),
    ("running.append(waiting.pop(0))", "running.append(waiting.pop())"),
]
