"""Bug: each assignment's place in its expert's queue is a cumulative sum of a float16 mask.

GShard-style dispatch numbers the assignments of an expert with `cumsum(one_hot) - 1`; done in
the router's half precision, the places past 2048 are rounded to even numbers (2049 to 2048,
2051 to 2052): some places repeat, others are skipped, and a capacity near 2048 keeps one
assignment too many or too few.
"""

CAUGHT_BY = ["test_plan_keeps_at_most_capacity_in_priority_order"]
EDITS = [
    (
        "    position = torch.arange(k * T, device=experts.device) - starts[flat[order]]  # (k·T,)",
        "    mask = torch.nn.functional.one_hot(flat[order], num_experts).to(torch.float16)\n"
        "    position = (mask.cumsum(dim=0) * mask).sum(dim=1).long() - 1  # (k·T,)",
    ),
]
