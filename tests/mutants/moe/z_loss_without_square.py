"""Bug: the z-loss is the mean logsumexp, not its square.

Without the square the loss is linear in a shift of the logits and no longer grows
faster for the tokens whose logits have run away.
"""

CAUGHT_BY = ["test_router_z_loss_matches_oracle"]
EDITS = [
    (
        "return torch.logsumexp(logits.float(), dim=-1).square().mean()",
        "return torch.logsumexp(logits.float(), dim=-1).mean()",
    ),
]
