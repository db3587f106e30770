"""Bug: the load-balancing loss counts each expert's assignments in the logits' dtype.

The fraction f_e is often computed as the mean of a one-hot routing mask, and in mixed-precision
training the mask takes the logits' float16 or bfloat16. float16 holds the integers exactly only
up to 2048 (bfloat16 up to 256): with 2049 tokens all sent to one expert its count comes out as
2048, and a loss that must be exactly 1 (or E) is not.
"""

CAUGHT_BY = ["test_load_balancing_loss_counts_past_float16_integers"]
EDITS = [
    (
        "    f = torch.bincount(experts.reshape(-1), minlength=E).float() / (T * k)  # (E,)",
        "    mask = torch.nn.functional.one_hot(experts.reshape(-1), E).to(logits.dtype)\n"
        "    f = mask.sum(dim=0).float() / (T * k)  # (E,)",
    ),
]
