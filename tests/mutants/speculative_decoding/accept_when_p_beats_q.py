"""Bug: a draft token is accepted when p >= q and rejected otherwise, with no random draw.

It reads like "keep the tokens the target likes at least as much", and greedy decoding still
works; but a token with p/q = 0.25 must survive a quarter of the time, not never, so sampling
loses mass wherever the draft is over-confident.
"""

CAUGHT_BY = ["test_acceptance_probability_is_min_one_p_over_q"]
EDITS = [
    (
        "accepted = u * q_x < p_x",
        "accepted = p_x >= q_x",
    ),
]
