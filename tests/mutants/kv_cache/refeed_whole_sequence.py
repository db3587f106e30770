"""Bug: generate feeds the whole sequence to the model at every step.

The tokens are right, so it looks finished; but the cache is never used and the work per step
grows with the length: quadratic generation, the very thing a KV cache exists to avoid.
"""

import torch

from reference.kv_cache import (  # noqa: F401
    KVCache,
    OutOfBlocks,
    PagedKVCache,
    kv_cache_bytes,
    paged_attention,
)


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens):
    if prompt_ids.dim() != 2 or prompt_ids.shape[1] + max_new_tokens > model.config.max_seq_len:
        raise ValueError("prompt_ids: expected [B, T] that fits max_seq_len")
    ids = prompt_ids
    for _ in range(max_new_tokens):
        nxt = model(ids)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids
