"""Bug: after verification the target's cache is rolled back, the draft's is not.

The draft's memory feels private to the proposal loop; but it holds the keys of the proposals
the target rejected, so every later proposal is drafted from a context that never happened and
agrees with the target less often.
"""

CAUGHT_BY = ["test_with_room_each_request_takes_the_rounds_its_draft_earns"]
EDITS = [("            seq.draft_cached = min(seq.draft_cached, len(seq.tokens) - 1)\n", "")]
