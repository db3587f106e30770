"""Bug: the dtype check refuses every dtype that is not a floating-point type.

"Keys and values are floats" is true of most models, so the check looks like good hygiene; but
quantised caches store int8 or uint8, and kv_cache_bytes, KVCache and PagedKVCache then refuse
them.
"""

CAUGHT_BY = [
    "test_cache_in_every_storage_dtype",
    "test_paged_cache_in_every_dtype",
    "test_kv_cache_bytes_every_dtype",
]
EDITS = [
    (
        "    if not isinstance(dtype, torch.dtype):\n",
        "    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:\n",
    ),
]
