"""Bug: before the ring buffer fills, append returns all `window` slots, empty ones included.

The zero keys of the empty slots score 0 and take part in the softmax during the first
window - 1 steps.
"""

CAUGHT_BY = [
    "test_rolling_cache_append_returns_the_window",
    "test_decoding_equals_sliding_window_attention",
]
EDITS = [
    (
        "        n = min(self._seq_len, self.window)\n",
        "        n = self.window  # empty slots too\n",
    ),
]
