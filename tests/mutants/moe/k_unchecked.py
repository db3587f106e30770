"""Bug: k is not validated, so k = 0 routes nothing and k > E fails deep inside torch.topk.

topk seems to check its own argument, but k = 0 is legal for it and k > E raises a
RuntimeError that does not say which argument was wrong.
"""

CAUGHT_BY = ["test_bad_router_input_raises_value_error"]
EDITS = [
    (
        ("    _check_k(k, logits.shape[1])\n    probs"),
        "    probs",
    ),
]
