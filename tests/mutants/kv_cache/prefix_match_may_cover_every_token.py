"""Bug: match counts every full block of the prompt, the last token's block included.

A prompt of exactly k blocks, all cached, is then "all cached": start returns len(tokens), and
the caller has no token left to feed the model, so no logits come out for the next token.
"""

CAUGHT_BY = ["test_match_is_pure_and_exact"]
EDITS = [
    (
        "        for i in range((len(tokens) - 1) // bs):  # the last token is always fed",
        "        for i in range(len(tokens) // bs):  # the last token is always fed",
    ),
]
