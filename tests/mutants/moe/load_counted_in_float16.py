"""Bug: expert_load counts assignments by summing a float16 one-hot mask.

Counting with the router's mask in the model's half precision is natural in mixed-precision
code and right for small batches, but float16 holds integers exactly only up to 2048: an expert
sent 2049 assignments is reported as having 2048.
"""

CAUGHT_BY = ["test_expert_load_reports_routed_and_kept"]
EDITS = [
    (
        "    routed = torch.bincount(experts.reshape(-1), minlength=num_experts)  # (E,)\n"
        "    kept = routed",
        "    mask = torch.nn.functional.one_hot(experts.reshape(-1), num_experts)\n"
        "    routed = mask.to(torch.float16).sum(dim=0).long()  # (E,)\n"
        "    kept = routed",
    ),
]
