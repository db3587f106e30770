"""Bug: the z-loss computes log(sum(exp(logits))) directly.

Three obvious calls instead of torch.logsumexp; exp overflows float32 once a logit passes 88,
exactly when the z-loss is needed to pull runaway logits back.
"""

CAUGHT_BY = ["test_router_z_loss_matches_oracle"]
EDITS = [
    (
        "return torch.logsumexp(logits.float(), dim=-1).square().mean()",
        "return logits.float().exp().sum(dim=-1).log().square().mean()",
    ),
]
