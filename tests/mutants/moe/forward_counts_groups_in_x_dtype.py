"""Bug: moe_forward sizes each expert's group by summing the routing mask in x's dtype.

Summing a one-hot mask of the router's choices is the usual way to count an expert's tokens,
and in a float16 or bfloat16 model the mask is made in the model's dtype. float16 holds the
integers exactly only up to 2048 (bfloat16 up to 256): an expert sent 2049 tokens is given a
group of 2048, its last row is never computed and every later group is read one row off.
"""

CAUGHT_BY = ["test_moe_forward_counts_groups_past_float16_integers"]
EDITS = [
    (
        "    for e, count in enumerate(plan.counts.tolist()):",
        "    counts = torch.nn.functional.one_hot(experts, E).to(x.dtype).sum(dim=(0, 1))  # (E,)\n"
        "    if capacity is not None:\n"
        "        counts = counts.clamp(max=capacity)\n"
        "    for e, count in enumerate(counts.long().tolist()):",
    ),
]
