"""Bug: the paged cache keeps the tensors it is given and never writes its pool.

Block tables and free counts are kept perfectly, so every bookkeeping check passes, and gather
concatenates the stored pieces. But the pool is never used: the memory is held twice, and a
caller that reuses its buffers changes what the cache returns.
"""

CAUGHT_BY = ["test_pool_holds_the_tokens_where_the_block_table_says"]
REPLACE = {
    "PagedKVCache.append": """
        def append(self, seq_id, k, v) -> None:
            _, Hkv, bs, D = self.k_pool.shape
            for name, x in (("k", k), ("v", v)):
                if x.dim() != 3 or x.shape[0] != Hkv or x.shape[2] != D or x.shape != k.shape:
                    raise ValueError(f"{name}: expected shape [{Hkv}, T, {D}], got {list(x.shape)}")
                if x.dtype != self.k_pool.dtype:
                    raise ValueError(f"{name}: expected dtype {self.k_pool.dtype}, got {x.dtype}")
            start, T = self.length(seq_id), k.shape[1]
            table = self.tables.get(seq_id, [])
            needed = math.ceil((start + T) / bs) - len(table)
            if needed > len(self.free_list):
                raise OutOfBlocks(f"sequence {seq_id!r} needs {needed} more block(s)")
            self.tables[seq_id] = table + [self.free_list.pop() for _ in range(needed)]
            self.lengths[seq_id] = start + T
            self.pieces = getattr(self, "pieces", {})
            self.pieces.setdefault(seq_id, []).append((k, v))
    """,
    "PagedKVCache.gather": """
        def gather(self, seq_id):
            if seq_id not in self.tables:
                raise ValueError(f"seq_id: unknown sequence {seq_id!r}")
            parts = self.pieces[seq_id]
            return torch.cat([k for k, _ in parts], dim=1), torch.cat([v for _, v in parts], dim=1)
    """,
    "PagedKVCache.free": """
        def free(self, seq_id) -> None:
            if seq_id not in self.tables:
                raise ValueError(f"seq_id: unknown sequence {seq_id!r}")
            self.free_list.extend(reversed(self.tables.pop(seq_id)))
            del self.lengths[seq_id]
            del self.pieces[seq_id]
    """,
}
