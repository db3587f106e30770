"""Bug: f_e counts only each token's first choice.

Copied from top-1 routing code (experts[:, 0]); the second choices carry half the load
at k = 2 and are invisible to the loss.
"""

CAUGHT_BY = [
    "test_load_balancing_loss_is_one_under_uniform_routing",
    "test_load_balancing_loss_matches_oracle_and_its_gradient",
]
EDITS = [
    (
        "f = torch.bincount(experts.reshape(-1), minlength=E).float() / (T * k)  # (E,)",
        "f = torch.bincount(experts[:, 0], minlength=E).float() / T  # (E,)",
    ),
]
