"""Bug: every row takes a token from its last logits, a row that fed only a chunk of its
prompt too.

One row, one token is the rule of level 2, where a joining row feeds its whole prompt. A chunk
ends in the middle of the prompt: its last logits predict the next prompt token, which the
request already has, not its first new token.
"""

CAUGHT_BY = [
    "test_chunked_tokens_equal_naive_serve_within_every_budget",
    "test_a_long_prompt_alone_is_fed_in_chunks",
]
EDITS = [
    (
        "            if seq.feed < seq.pending:  # level 5: a chunk of a prefill, no token yet\n",
        "            if False:  # every row gives a token\n",
    ),
]
