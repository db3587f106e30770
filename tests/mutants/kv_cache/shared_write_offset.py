"""Bug: every layer writes at seq_len, which is read from layer 0.

Layer 0 is updated first, so by the time layer 1 writes, seq_len already counts the new tokens:
layer 1 writes one chunk too far and leaves a hole of zeros behind it.
"""

CAUGHT_BY = ["test_update_returns_everything_appended"]
EDITS = [
    ("start, T = self.lengths[layer], k.shape[2]", "start, T = self.seq_len, k.shape[2]"),
]
