"""Bug: the acceptance ratio is min(1, p / (q + 1e-9)), "to avoid dividing by zero".

A draft token was drawn from q, so q > 0 there and the guard is never needed; and where q is
tiny the epsilon swamps it: a token the target likes as much as (or more than) the draft is
rejected, and the output no longer follows p.
"""

CAUGHT_BY = ["test_a_tiny_draft_probability_is_judged_by_the_ratio_alone"]
EDITS = [
    (
        "    accepted = u * q_x < p_x  # u < p / q",
        "    accepted = u < (p_x / (q_x + 1e-9)).clamp(max=1)  # u < p / q",
    ),
]
