"""Bug: crop rolls back layer 0 only.

seq_len reads layer 0, so the crop looks done; the other layers keep writing after the stale
tokens, and speculative-decoding rollbacks silently corrupt every layer but the first.
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
    def crop(self, length) -> None:
        if not 0 <= length <= self.seq_len:
            raise ValueError(f"length: expected 0..{self.seq_len}")
        self.lengths[0] = length


def generate(model, prompt_ids, max_new_tokens):
    return _generate(model, prompt_ids, max_new_tokens)
