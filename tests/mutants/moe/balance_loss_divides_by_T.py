"""Bug: f_e divides the assignments to e by T instead of T · k.

Switch Transformer's formula is for k = 1, where the two agree; with k > 1 the loss is k
times too large and no longer 1 at perfect balance.
"""

CAUGHT_BY = [
    "test_load_balancing_loss_is_one_under_uniform_routing",
    "test_load_balancing_loss_matches_oracle_and_its_gradient",
]
EDITS = [
    (
        "f = torch.bincount(experts.reshape(-1), minlength=E).float() / (T * k)  # (E,)",
        "f = torch.bincount(experts.reshape(-1), minlength=E).float() / T  # (E,)",
    ),
]
