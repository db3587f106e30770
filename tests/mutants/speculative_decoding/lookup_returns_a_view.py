"""Bug: lookup_draft hands back a slice of the context itself.

`ids[follow : follow + k]` is a view: the proposal and the caller's context are one tensor, so
writing the proposal into an output buffer, or the caller editing its context, changes the other.
"""

CAUGHT_BY = ["test_lookup_draft_known_cases", "test_lookup_draft_matches_the_oracle"]
EDITS = [
    (
        "            return ids[follow : follow + k].clone()  # a new tensor, not a view of ids\n",
        "            return ids[follow : follow + k]\n",
    )
]
