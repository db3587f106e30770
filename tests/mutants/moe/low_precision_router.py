"""Bug: the router runs in the input's precision: logits and softmax in float16/bfloat16.

Keeping everything in the model's dtype is the default habit; the router is small but its
choices are discrete, and rounding moves both the weights and which experts win.
"""

CAUGHT_BY = [
    "test_route_picks_the_top_k_with_renormalised_weights",
    "test_moe_forward_matches_oracle",
]
EDITS = [
    (
        "probs = torch.softmax(logits.float(), dim=-1)",
        "probs = torch.softmax(logits, dim=-1).float()",
    ),
    (
        "logits = x.float() @ gate_w.float().T  # (T, E) router in float32",
        "logits = x @ gate_w.T  # (T, E) in x's dtype",
    ),
]
