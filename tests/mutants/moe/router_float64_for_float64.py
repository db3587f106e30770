"""Bug: the router runs in float64 when x is float64.

Promoting to at least float32 instead of casting to float32 seems more precise, but the router's
logits are pinned to float32 for every dtype: where two logits differ by less than float32
rounds away, float64 picks another expert than the layer is specified to.
"""

CAUGHT_BY = ["test_the_router_runs_in_float32_for_float64_input"]
EDITS = [
    (
        "    logits = x.float() @ gate_w.float().T  # (T, E) router in float32",
        "    router = torch.promote_types(x.dtype, torch.float32)\n"
        "    logits = x.to(router) @ gate_w.to(router).T  # (T, E)",
    ),
]
