"""Bug: kv_cache_bytes assumes two bytes per number whatever the dtype.

Most published KV-cache arithmetic is for fp16, so the 2 gets hard-coded.
"""

from reference.kv_cache import (  # noqa: F401
    KVCache,
    OutOfBlocks,
    PagedKVCache,
    generate,
    paged_attention,
)


def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype) -> int:
    return 2 * n_layers * n_kv_heads * head_dim * seq_len * batch_size * 2
