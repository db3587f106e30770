"""Bug: prompt lookup continues the first occurrence of the n-gram instead of the most recent.

Both are "an earlier occurrence"; but the most recent one is the likeliest to continue the same
way (the current paragraph, the latest version of the code), and the kata specifies it.
"""

CAUGHT_BY = ["test_lookup_draft_known_cases"]
EDITS = [
    (
        "follow = int(starts[-1, 0]) + n",
        "follow = int(starts[0, 0]) + n",
    ),
]
