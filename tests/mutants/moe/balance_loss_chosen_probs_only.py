"""Bug: P_e averages the router probability only over the tokens that chose expert e.

Both factors then come from the same top-k selection, which reads naturally but gives the
wrong value and pushes the gradient only through the chosen experts.
"""

CAUGHT_BY = [
    "test_load_balancing_loss_matches_oracle_and_its_gradient",
    "test_load_balancing_loss_is_one_under_uniform_routing",
]
EDITS = [
    (
        "P = torch.softmax(logits.float(), dim=-1).mean(dim=0)  # (E,)",
        (
            "probs = torch.softmax(logits.float(), dim=-1)  # (T, E)\n"
            "    chosen = torch.zeros_like(probs).scatter(1, experts, 1.0)  # (T, E)\n"
            "    P = (probs * chosen).sum(dim=0) / T  # (E,)"
        ),
    ),
]
