"""Bug: the bonus token is drawn from p[k - 1], the row that checked the last proposal.

Off by one between "the distribution at proposal i's position" and "the distribution after it":
the bonus then repeats the last proposal's distribution instead of looking one step further.
"""

CAUGHT_BY = ["test_bonus_token_is_drawn_from_the_last_row_of_p"]
EDITS = [
    (
        "last = p[k] if n == k else",
        "last = p[k - 1] if n == k else",
    ),
]
