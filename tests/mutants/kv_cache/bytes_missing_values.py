"""Bug: kv_cache_bytes counts the keys but forgets the values.

The name says "KV", but the arithmetic is easy to write with one tensor in mind.
"""

from reference.kv_cache import (  # noqa: F401
    KVCache,
    OutOfBlocks,
    PagedKVCache,
    generate,
    paged_attention,
)


def kv_cache_bytes(n_layers, n_kv_heads, head_dim, seq_len, batch_size, dtype) -> int:
    return n_layers * n_kv_heads * head_dim * seq_len * batch_size * dtype.itemsize
