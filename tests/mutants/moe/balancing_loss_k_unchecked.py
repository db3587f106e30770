"""Bug: load_balancing_loss checks the experts' dtype and indices but not the k they imply.

experts of shape [4, 4] for E = 3 (k = 4 > E, some expert chosen twice for one token) give a
number where the README asks for a ValueError: the k that experts.shape[1] implies is in 1..E.
"""

CAUGHT_BY = ["test_bad_loss_input_raises_value_error"]
EDITS = [
    (
        "    _check_experts(experts, E)\n    k = experts.shape[1]\n    f = torch.bincount",
        "    if experts.dtype != torch.int64 or (experts.numel() and (\n"
        "        int(experts.min()) < 0 or int(experts.max()) >= E\n    )):\n"
        '        raise ValueError(f"experts: expected int64 indices in 0..{E - 1}")\n'
        "    k = experts.shape[1]\n    f = torch.bincount",
    ),
]
