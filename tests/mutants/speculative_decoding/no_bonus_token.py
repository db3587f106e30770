"""Bug: when every proposal is accepted, the round ends without the target's bonus token.

The output is still right, so it looks finished; but the target's last row of logits, paid for
in the same call, is thrown away, and a perfect draft makes k tokens a call instead of k + 1.
"""

CAUGHT_BY = [
    "test_p_equal_to_q_accepts_every_draft_token",
    "test_a_copy_of_the_target_is_always_accepted",
]
EDITS = [
    (
        (
            "    last = p[k] if n == k else residual_distribution(p[n], q[n])  # "
            "the bonus, or the correction\n"
        ),
        (
            "    if 0 < n == k:\n"
            "        return draft_tokens.clone()\n"
            "    last = p[k] if n == k else residual_distribution(p[n], q[n])  # "
            "the bonus, or the correction\n"
        ),
    ),
]
