"""Bug: the sliding window's key positions are made in the inputs' dtype.

`torch.arange(..., dtype=q.dtype)` keeps every tensor of the call in one dtype, and in float32
it is exact. In float16 only every other integer exists past 2048 (every fourth past 4096), in
bfloat16 one in 32: the padding past the last key rounds onto a real position and is read as a
key of zeros.
"""

CAUGHT_BY = ["test_sliding_window_positions_past_2048_stay_exact"]
EDITS = [
    (
        "    key_pos = torch.arange(start, start + length, device=q.device)\n",
        "    key_pos = torch.arange(start, start + length, device=q.device, dtype=q.dtype)\n",
    ),
]
