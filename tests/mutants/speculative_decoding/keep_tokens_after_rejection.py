"""Bug: every accepted draft token is kept, even those after the first rejection.

Each token was judged on its own, so keeping all the "yes" verdicts looks fair; but a proposal
after a rejected one was drawn in a context that no longer exists.
"""

CAUGHT_BY = ["test_the_first_rejection_ends_the_round"]
EDITS = [
    (
        "return torch.cat([draft_tokens[:n], _sample(last, generator)])",
        (
            "return torch.cat([draft_tokens[accepted] if n < k else draft_tokens, "
            "_sample(last, generator)])"
        ),
    ),
]
