"""Bug: with a draft, a block is registered as soon as the target holds its tokens.

The draft reads committed tokens lazily (only in a round that proposes), so a block the target
has filled may hold nothing yet in the draft's pool. A request that takes it then drafts from
missing keys: its answers stay right (the target verifies), but the draft's proposals are
rejected and speculation buys nothing.
"""

CAUGHT_BY = ["test_an_agreeing_draft_keeps_its_pace_over_shared_blocks"]
EDITS = [
    (
        "        held = seq.cached if self.draft is None else min(seq.cached, seq.draft_cached)\n",
        "        held = seq.cached  # the target holds them\n",
    ),
]
