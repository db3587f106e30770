"""Bug: the paged cache writes token t at offset t // block_size instead of t % block_size.

Division and remainder get swapped; with scattered blocks the keys land in the wrong slots.
"""

import torch

from reference.kv_cache import (  # noqa: F401
    KVCache,
    OutOfBlocks,
    generate,
    kv_cache_bytes,
    paged_attention,
)
from reference.kv_cache import PagedKVCache as _Correct


class PagedKVCache(_Correct):
    def append(self, seq_id, k, v) -> None:
        start = self.length(seq_id)
        super().append(seq_id, k, v)
        bs = self.block_size
        table = torch.tensor(self.tables[seq_id])
        positions = torch.arange(start, start + k.shape[1])
        blocks = table[positions // bs]
        self.k[blocks, :, (positions // bs) % bs] = k.transpose(0, 1)
        self.v[blocks, :, (positions // bs) % bs] = v.transpose(0, 1)
