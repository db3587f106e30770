"""Bug: lookup_draft refuses an empty context.

An empty `ids` has nothing to look up, which is an answer (an empty proposal), not an error.
"""

CAUGHT_BY = ["test_lookup_draft_known_cases"]
EDITS = [
    (
        "    if (ids < 0).any():\n",
        "    if ids.numel() == 0 or (ids < 0).any():\n",
    ),
]
