"""Bug: the losses come back as one-element tensors of shape [1], not 0-dim scalars.

A `.reshape(1)` (or a `keepdim=True` reduction) looks harmless, but a loss of shape [1] added to
a scalar loss broadcasts to [1], and `loss.item()`-free code such as logging or `backward()` on
a sum of losses now sees a vector.
"""

CAUGHT_BY = [
    "test_losses_run_in_float32_whatever_the_logits_dtype",
    "test_load_balancing_loss_matches_oracle_and_its_gradient",
]
EDITS = [
    ("return E * (f * P).sum()", "return (E * (f * P).sum()).reshape(1)"),
    (
        "return torch.logsumexp(logits.float(), dim=-1).square().mean()",
        "return torch.logsumexp(logits.float(), dim=-1).square().mean().reshape(1)",
    ),
]
