"""Strategies and helpers the KV-cache kata's tests share: dtypes, layouts and model setups."""

from __future__ import annotations

import functools
import math

import torch
from hypothesis import strategies as st

from grading.judge.strategies import gqa_heads, lengths, seeds
from grading.model import make_model

# The dtypes a cache may hold in these tests (CPU-friendly, every width from 8 bytes to 2).
FLOAT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
# What a cache may also store: the 8-bit types of quantised caches.
STORAGE_DTYPES = FLOAT_DTYPES + [torch.float8_e4m3fn, torch.float8_e5m2, torch.int8, torch.uint8]
# Every dtype torch defines: wherever a function takes a dtype, it must take any of them.
EVERY_DTYPE = sorted(
    {value for value in vars(torch).values() if isinstance(value, torch.dtype)}, key=str
)


def strided_like(x: torch.Tensor, how: str) -> torch.Tensor:
    """x's values in a non-contiguous layout: "transposed" (the last two dims swapped in memory)
    or "gapped" (every other element of a buffer twice as wide). Same values, other strides."""
    if how == "transposed":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if how == "gapped":
        wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype)
        wide[..., ::2] = x
        return wide[..., ::2]
    raise ValueError(f"how: expected 'transposed' or 'gapped', got {how!r}")


@functools.lru_cache(maxsize=64)
def tiny_model(seed: int, n_heads: int, n_kv_heads: int, dtype: torch.dtype, max_seq_len=256):
    """The shared model, built once per recipe (building it is most of an example's time)."""
    return make_model(seed, dtype, n_heads=n_heads, n_kv_heads=n_kv_heads, max_seq_len=max_seq_len)


@st.composite
def model_setups(draw):
    """(model recipe, prompt): tiny_model(**recipe, dtype=...) builds the model in any dtype."""
    n_heads, n_kv_heads = draw(
        gqa_heads(max_kv_heads=2, max_group=4), label="(n_heads, n_kv_heads)"
    )
    recipe = dict(
        seed=draw(st.integers(0, 3), label="model seed"), n_heads=n_heads, n_kv_heads=n_kv_heads
    )
    B = draw(st.integers(1, 3), label="batch")
    T = draw(lengths(12), label="prompt length")
    prompt_seed = draw(seeds(), label="prompt seed")
    prompt = torch.randint(0, 64, (B, T), generator=torch.Generator().manual_seed(prompt_seed))
    return recipe, prompt


def prefix_kv(tokens: list[int], n_kv_heads: int, head_dim: int, dtype=torch.float32):
    """Keys and values [n_kv_heads, T, head_dim] of the token ids `tokens`, as a model makes them:
    token p's depend on tokens[:p + 1] alone, so equal prefixes give equal keys and values, and a
    different earlier token (almost surely) changes every later one."""
    codes, h = [], 0
    for t in tokens:  # a rolling hash of the prefix up to each token
        h = (h * 1_000_003 + t + 1) % 1_000_000_007
        codes.append(h)
    width = n_kv_heads * head_dim
    freq = torch.arange(1, 2 * width + 1, dtype=torch.float64) * 0.6180339887  # (2 Hkv D,)
    x = torch.sin(torch.tensor(codes, dtype=torch.float64)[:, None] * freq)  # (T, 2 Hkv D)
    k, v = (
        part.reshape(len(tokens), n_kv_heads, head_dim).transpose(0, 1)
        for part in x.split(width, 1)
    )
    return k.to(dtype).contiguous(), v.to(dtype).contiguous()


class PrefixModel:
    """What a PrefixCache holds after each call by the README's rules, kept in plain Python: the
    free queue (front first), ref counts, the registered prefixes, each sequence's blocks and
    token ids. A block is registered under the whole prefix up to its end, as a tuple."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.queue = list(range(num_blocks))  # free blocks; append takes from the front
        self.refs = [0] * num_blocks
        self.registered: dict[tuple[int, ...], int] = {}  # prefix -> block
        self.tables: dict = {}
        self.tokens: dict = {}

    def cached_blocks(self, tokens: list[int]) -> list[int]:
        """The registered blocks of the leading full blocks, never the last token's block."""
        found = []
        for end in range(self.block_size, len(tokens), self.block_size):
            block = self.registered.get(tuple(tokens[:end]))
            if block is None:
                break
            found.append(block)
        return found

    def match(self, tokens: list[int]) -> int:
        return len(self.cached_blocks(tokens)) * self.block_size

    def start(self, seq, tokens: list[int]) -> int:
        found = self.cached_blocks(tokens)
        for block in found:
            self.refs[block] += 1
            if block in self.queue:
                self.queue.remove(block)
        n = len(found) * self.block_size
        self.tables[seq], self.tokens[seq] = found, list(tokens[:n])
        return n

    def new_blocks(self, seq, T: int) -> int:
        n = len(self.tokens.get(seq, [])) + T
        return math.ceil(n / self.block_size) - len(self.tables.get(seq, []))

    def append(self, seq, tokens: list[int]) -> bool:
        """False, changing nothing, when the free queue is too short (OutOfBlocks)."""
        more = self.new_blocks(seq, len(tokens))
        if more > len(self.queue):
            return False
        taken, self.queue = self.queue[:more], self.queue[more:]
        for block in taken:  # a taken block forgets what it cached
            self.refs[block] = 1
            self.registered = {p: b for p, b in self.registered.items() if b != block}
        table = self.tables.setdefault(seq, [])
        ids = self.tokens.setdefault(seq, [])
        before = len(ids)
        table += taken
        ids += tokens
        bs = self.block_size
        for i in range(before // bs, len(ids) // bs):  # filled now: registered unless taken
            self.registered.setdefault(tuple(ids[: (i + 1) * bs]), table[i])
        return True

    def free(self, seq) -> None:
        for block in reversed(self.tables.pop(seq)):
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.queue.append(block)
        del self.tokens[seq]
