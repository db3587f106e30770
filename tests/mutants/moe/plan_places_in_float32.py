"""Bug: each assignment's place in its expert's queue is a float32 cumsum of a one-hot mask.

A cumsum of the mask, read back with gather, looks like an integer count and costs no
multiplications; but float32 holds consecutive integers only up to 2**24, so past that many
assignments to one expert the places round down and more than C are kept.
"""

CAUGHT_BY = ["test_plan_keeps_capacity_past_float32_integers"]
EDITS = [
    (
        "position = torch.arange(k * T, device=experts.device) - starts[flat[order]]",
        "grouped = flat[order]\n"
        "    mask = F.one_hot(grouped, num_experts).float()  # (k·T, E)\n"
        "    position = mask.cumsum(0).gather(1, grouped[:, None]).reshape(-1) - 1",
    ),
]
