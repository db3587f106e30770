"""Bug: after a rejection, the correction token is drawn from the target's p, not the residual.

"The target rejected the draft, so let the target choose" sounds right, but the draft's
accepted tokens already hold min(p, q) of the mass: drawing from p again counts it twice, and
tokens the draft over-proposes come out too often.
"""

CAUGHT_BY = ["test_accept_reject_output_has_the_exact_distribution"]
EDITS = [
    (
        "last = p[k] if n == k else residual_distribution(p[n], q[n])",
        "last = p[n]",
    ),
]
