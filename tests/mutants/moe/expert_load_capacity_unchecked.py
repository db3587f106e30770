"""Bug: expert_load does not validate capacity, so a negative one gives negative kept counts.

plan_dispatch checks its capacity and expert_load looks too simple to need it; routed.clamp(max=-1)
then reports -1 assignments kept per expert without complaint.
"""

CAUGHT_BY = ["test_bad_plan_input_raises_value_error"]
EDITS = [
    (
        ("    _check_capacity(capacity)\n    routed = torch.bincount"),
        "    routed = torch.bincount",
    ),
]
