"""Bug: dynamic batching waits max_wait even when a full batch is already waiting.

Only the timer starts a batch; a full batch sits idle, which is the delay dynamic batching was
meant to remove.
"""

CAUGHT_BY = ["test_dynamic_batches_start_when_full_or_after_max_wait"]
EDITS = [("full = len(waiting) >= max_batch_size", "full = False")]
