"""Bug: generate prefills the prompt minus its last token, then feeds that token alone.

A pattern copied from decoders that "prime" the cache. The tokens come out right, but it makes
one extra model call, breaking the contract: one call on the whole prompt, then one per token.
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
    c = model.config
    B, T = prompt_ids.shape
    if T + max_new_tokens > c.max_seq_len:
        raise ValueError("max_new_tokens: too many for max_seq_len")
    if max_new_tokens == 0:
        return prompt_ids.clone()
    cache = KVCache(c.n_layers, B, c.n_kv_heads, c.head_dim, T + max_new_tokens,
                    next(model.parameters()).dtype)  # fmt: skip
    if T > 1:
        model(prompt_ids[:, :-1], cache)
    ids = prompt_ids
    nxt = prompt_ids[:, -1:]
    for _ in range(max_new_tokens):
        nxt = model(nxt, cache)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
    return ids
