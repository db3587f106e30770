"""Bug: the acceptance probability is min(1, q/p) instead of min(1, p/q).

An easy slip when the ratio is written from the draft's point of view: tokens the draft
over-proposes are then kept the most, exactly the wrong way round.
"""

CAUGHT_BY = ["test_acceptance_probability_is_min_one_p_over_q"]
EDITS = [
    (
        "accepted = u * q_x < p_x",
        "accepted = u * p_x < q_x",
    ),
]
