"""Bug: a request that joins takes the blocks of its whole future at once, prompt plus every
token it may generate, instead of the blocks of the tokens the call feeds.

Nothing overflows and every token is right, but with a tight pool requests wait while blocks
stand free for tokens that do not exist yet.
"""

CAUGHT_BY = ["test_requests_join_while_their_prompts_blocks_are_free"]
EDITS = [
    (
        "        fed_to = seq.cached + seq.feed + seq.propose\n",
        "        fed_to = seq.cached + seq.feed + seq.propose\n"
        "        if not seq.blocks:  # joining: reserve for everything it may ever hold\n"
        "            whole = len(seq.request.prompt) + seq.request.max_new_tokens - 1\n"
        "            fed_to = max(fed_to, whole)\n",
    ),
]
