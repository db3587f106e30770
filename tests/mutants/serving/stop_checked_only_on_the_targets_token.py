"""Bug: only the newest committed token is checked against `stop`, so with a draft a stop token
among the accepted proposals is kept with the tokens after it.

Without a draft a step commits one token, and `if tokens[-1] in stop` is the whole check. With a
draft a round commits the accepted proposals and the target's token at once, and a stop token
in the middle of them must end the completion there.
"""

CAUGHT_BY = ["test_speculative_serve_keeps_no_token_past_the_stop"]
EDITS = [
    (
        "            seq.end_at_stop(committed)  # level 4: nothing past the first stop token\n",
        "            seq.end_at_stop(len(seq.tokens) - 1)  # the newest token only\n",
    ),
]
