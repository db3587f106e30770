"""Bug: kv_cache_bytes reads the width of a number from torch.finfo.

`torch.finfo(dtype).bits // 8` is right for every float type, so it looks general; but int8 and
other quantised caches have no finfo, and the call fails for them.
"""

CAUGHT_BY = ["test_kv_cache_bytes_every_dtype"]
EDITS = [
    (
        "per_token = 2 * n_layers * n_kv_heads * head_dim * dtype.itemsize",
        "per_token = 2 * n_layers * n_kv_heads * head_dim * (torch.finfo(dtype).bits // 8)",
    ),
]
