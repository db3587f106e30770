"""Bug: the router's softmax is exp(logits) / sum(exp(logits)), without subtracting the max.

It is the textbook formula and fine for the small logits people try first; logits of 100 already
overflow float32's exp to inf, and inf / inf is NaN.
"""

CAUGHT_BY = ["test_route_survives_extreme_logits"]
EDITS = [
    (
        "probs = torch.softmax(logits.float(), dim=-1)",
        ("scores = logits.float().exp()\n    probs = scores / scores.sum(dim=-1, keepdim=True)"),
    ),
]
