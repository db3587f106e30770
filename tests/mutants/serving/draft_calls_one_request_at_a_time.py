"""Bug: the draft makes its proposals one request at a time.

Drafting is a small model's loop, so running it request by request looks cheap enough; but a
step then costs a draft call per request per proposal, and the draft's calls, not the target's,
set the pace of every step.
"""

CAUGHT_BY = ["test_with_room_each_request_takes_the_rounds_its_draft_earns"]
EDITS = [
    (
        "            logits = self.call(self.draft, feeds)\n",
        "            logits = [self.call(self.draft, [f])[0] for f in feeds]\n",
    ),
]
