"""Bug: the z-loss runs in the logits' dtype and is cast to float32 only at the end.

The cast at the end looks like it keeps the promise "a float32 scalar"; but in float16 the square
of a logsumexp of 300 is already past 65504, so the loss is inf before the cast.
"""

CAUGHT_BY = ["test_losses_run_in_float32_whatever_the_logits_dtype"]
EDITS = [
    (
        "return torch.logsumexp(logits.float(), dim=-1).square().mean()",
        "return torch.logsumexp(logits, dim=-1).square().mean().float()",
    ),
]
