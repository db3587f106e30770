"""Bug: new requests join only when the running batch has emptied.

This is static batching in disguise, and a common first attempt: the batch is refilled as a
whole. Slots freed by short requests stay empty while others wait.
"""

CAUGHT_BY = ["test_continuous_fills_free_slots_at_once_first_come_first_served"]
EDITS = [
    (
        "batch, budget = [], budget_per_step",
        "batch, budget, draining = [], budget_per_step, bool(running)",
    ),
    (
        "while waiting and len(running) < max_batch_size and budget > 0:",
        "while waiting and len(running) < max_batch_size and budget > 0 and not draining:",
    ),
]
