"""Bug: plan_dispatch sorts the expert ids as uint8.

A byte per id sorts faster and E is usually small, but any E is allowed: with more than 256
experts the ids wrap (256 becomes 0), and those assignments land in another expert's group.
"""

CAUGHT_BY = ["test_plan_with_more_experts_than_a_byte_holds", "test_moe_forward_matches_oracle"]
EDITS = [
    (
        "    flat = experts.T.reshape(-1)  # (k·T,) rank-major: priority order",
        "    flat = experts.T.reshape(-1).to(torch.uint8).long()  # (k·T,) rank-major",
    ),
]
