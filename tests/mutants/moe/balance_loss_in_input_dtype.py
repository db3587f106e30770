"""Bug: the load-balancing loss takes the softmax in the logits' bfloat16/float16.

Mixed-precision training hands the router's logits over in bfloat16; the softmax there rounds
every probability to 8 bits, so the loss and its gradient drift from their float32 values.
"""

CAUGHT_BY = ["test_losses_run_in_float32_whatever_the_logits_dtype"]
EDITS = [
    (
        "P = torch.softmax(logits.float(), dim=-1).mean(dim=0)  # (E,)",
        "P = torch.softmax(logits, dim=-1).mean(dim=0).float()  # (E,)",
    ),
]
