"""Bug: every layer writes at seq_len, which is read from layer 0.

Layer 0 is updated first, so by the time layer 1 writes, seq_len already counts the new tokens:
layer 1 writes one chunk too far and leaves a hole of zeros behind it.
"""

import torch

from reference.kv_cache import OutOfBlocks, PagedKVCache, kv_cache_bytes, paged_attention  # noqa: F401


class KVCache:
    def __init__(self, n_layers, batch_size, n_kv_heads, head_dim, max_seq_len,
                 dtype=torch.float32, device="cpu"):  # fmt: skip
        shape = (n_layers, batch_size, n_kv_heads, max_seq_len, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = [0] * n_layers

    @property
    def seq_len(self) -> int:
        return self.lengths[0]

    def update(self, layer, k, v):
        S = self.k.shape[3]
        if not 0 <= layer < self.k.shape[0] or k.shape != v.shape or k.dim() != 4:
            raise ValueError(
                f"layer/k/v: expected shape {list(self.k.shape[1:3])} ... {self.k.shape[4]}"
            )
        if tuple(k.shape[:2]) != tuple(self.k.shape[1:3]) or k.shape[3] != self.k.shape[4]:
            raise ValueError(
                f"k: expected [{self.k.shape[1]}, {self.k.shape[2]}, T, {self.k.shape[4]}]"
            )
        start, T = self.seq_len, k.shape[2]
        if start + T > S:
            raise ValueError(f"k: would pass max_seq_len={S}")
        self.k[layer, :, :, start : start + T] = k
        self.v[layer, :, :, start : start + T] = v
        self.lengths[layer] = start + T
        return self.k[layer, :, :, : start + T], self.v[layer, :, :, : start + T]

    def crop(self, length) -> None:
        if not 0 <= length <= self.seq_len:
            raise ValueError(f"length: expected 0..{self.seq_len}")
        self.lengths = [min(n, length) for n in self.lengths]


@torch.no_grad()
def generate(model, prompt_ids, max_new_tokens):
    if prompt_ids.dim() != 2:
        raise ValueError("prompt_ids: expected [B, T]")
    c = model.config
    B, T = prompt_ids.shape
    if T + max_new_tokens > c.max_seq_len:
        raise ValueError("max_new_tokens: too many")
    if max_new_tokens == 0:
        return prompt_ids.clone()
    cache = KVCache(c.n_layers, B, c.n_kv_heads, c.head_dim, T + max_new_tokens,
                    next(model.parameters()).dtype)  # fmt: skip
    ids = prompt_ids
    logits = model(ids, cache)
    for i in range(max_new_tokens):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], dim=1)
        if i + 1 < max_new_tokens:
            logits = model(nxt, cache)
    return ids
