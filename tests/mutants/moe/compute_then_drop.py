"""Bug: every routed assignment goes through its expert; the dropped ones are zeroed after.

Masking after the fact gives the right numbers and is simpler to write, but the capacity
is there to bound the work an expert does, and this spends it anyway.
"""

CAUGHT_BY = ["test_dropped_assignments_cost_nothing"]
EDITS = [
    (
        "    plan = plan_dispatch(experts, E, capacity=capacity)\n",
        (
            "    kept_plan = plan_dispatch(experts, E, capacity=capacity)\n"
            "    kept = torch.zeros_like(weights)  # (T, k): 1 where the assignment is kept\n"
            "    kept[kept_plan.token, kept_plan.rank] = 1.0\n"
            "    weights = weights * kept  # a dropped assignment weighs 0 ...\n"
            "    plan = plan_dispatch(experts, E)  # ... but every routed assignment is computed\n"
        ),
    ),
]
