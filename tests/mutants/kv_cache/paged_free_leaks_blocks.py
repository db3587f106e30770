"""Bug: freeing a sequence returns only its last block to the pool.

The block table is dropped but most blocks are never handed back: the pool leaks until the
server can admit no one.
"""

from reference.kv_cache import (  # noqa: F401
    KVCache,
    OutOfBlocks,
    generate,
    kv_cache_bytes,
    paged_attention,
)
from reference.kv_cache import PagedKVCache as _Correct


class PagedKVCache(_Correct):
    def free(self, seq_id) -> None:
        if seq_id not in self.tables:
            raise ValueError(f"seq_id: unknown sequence {seq_id!r}")
        table = self.tables.pop(seq_id)
        self.free_list.append(table[-1])
        del self.lengths[seq_id]
