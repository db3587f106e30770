"""Bug: expert_load counts assignments with a float32 histogram (torch.histc).

histc is the first histogram people find, and float32 looks roomy next to float16, but it
holds consecutive integers only up to 2**24: an expert sent 2**24 + 1 assignments is reported
as 2**24.
"""

CAUGHT_BY = ["test_expert_load_counts_past_float32_integers"]
EDITS = [
    (
        "    routed = torch.bincount(experts.reshape(-1), minlength=num_experts)  # (E,)\n"
        "    kept = routed",
        "    ids = experts.reshape(-1).float()\n"
        "    routed = torch.histc(ids, bins=num_experts, min=-0.5, max=num_experts - 0.5).long()\n"
        "    kept = routed",
    ),
]
