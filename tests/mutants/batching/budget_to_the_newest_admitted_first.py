"""Bug: when the token budget runs short, the most recently admitted requests are served first.

Walking the running list from its end looks harmless while the budget covers everyone; once it
binds, the newest requests take it and the oldest, closest to done, wait step after step.
"""

CAUGHT_BY = ["test_a_binding_budget_serves_the_oldest_admitted_first"]
EDITS = [
    (
        "for seq in list(running):  # decodes and unfinished prefills first, oldest first",
        "for seq in list(reversed(running)):  # newest admitted first",
    ),
]
