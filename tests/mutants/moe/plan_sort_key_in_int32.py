"""Bug: the plan sorts a unique key expert · (T·k) + j held in int32.

Unique keys make any sort give the one right order, and int32 looks big enough for token
indices; but the key grows with the expert id times the number of assignments and wraps
past 2**31 (2**16 experts and 2**16 assignments), scrambling the groups.
"""

CAUGHT_BY = ["test_plan_where_expert_id_times_assignments_passes_int32"]
EDITS = [
    (
        "order = torch.sort(flat, stable=True).indices",
        "order = torch.argsort(\n"
        "        flat.to(torch.int32) * flat.numel()\n"
        "        + torch.arange(flat.numel(), dtype=torch.int32, device=flat.device)\n"
        "    ).long()",
    ),
]
