"""Bug: the k chosen experts are listed least probable first.

torch.sort is ascending by default; re-sorting the top-k (or topk(..., sorted=False)) loses
the order, and with a capacity limit the rank decides who is dropped.
"""

CAUGHT_BY = [
    "test_route_picks_the_top_k_with_renormalised_weights",
    "test_route_survives_extreme_logits",
]
EDITS = [
    (
        ("descending\n    weights = top"),
        (
            "descending\n"
            "    top, experts = top.flip(-1), experts.flip(-1)  # ascending\n"
            "    weights = top"
        ),
    ),
]
