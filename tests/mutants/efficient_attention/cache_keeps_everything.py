"""Bug: the rolling cache appends every token and returns the last `window`: memory grows forever.

The outputs are exactly right, so only the memory test can tell: this is a KV cache with a
sliding-window view, not a rolling buffer.
"""

CAUGHT_BY = [
    "test_rolling_cache_append_returns_the_window",
    "test_rolling_cache_memory_stops_growing_at_the_window",
]
REPLACE = {
    "RollingKVCache.append": """
def append(self, k_t, v_t):
    expected = self.k.shape[:2] + self.k.shape[3:]
    for name, t in (("k_t", k_t), ("v_t", v_t)):
        if t.shape != expected:
            raise ValueError(f"{name} must be {list(expected)}, got {list(t.shape)}")
    if self._seq_len == 0:  # start from an empty sequence, then grow one token at a time
        self.k, self.v = self.k[:, :, :0], self.v[:, :, :0]
    self.k = torch.cat([self.k, k_t[:, :, None].to(self.k.dtype)], dim=2)
    self.v = torch.cat([self.v, v_t[:, :, None].to(self.v.dtype)], dim=2)
    self._seq_len += 1
    return self.k[:, :, -self.window :], self.v[:, :, -self.window :]
""",
}
