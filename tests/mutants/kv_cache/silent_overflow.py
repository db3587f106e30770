"""Bug: an update past max_seq_len is silently truncated instead of refused.

Slicing past the end of a tensor does not raise in PyTorch, so the overflow goes unnoticed.
"""

from reference.kv_cache import KVCache as _Correct
from reference.kv_cache import (  # noqa: F401
    OutOfBlocks,
    PagedKVCache,
    kv_cache_bytes,
    paged_attention,
)
from reference.kv_cache import generate as _generate


class KVCache(_Correct):
    def update(self, layer, k, v):
        room = self.max_seq_len - self.lengths[layer]
        return super().update(layer, k[:, :, :room], v[:, :, :room])


def generate(model, prompt_ids, max_new_tokens):
    return _generate(model, prompt_ids, max_new_tokens)
