"""Bug: gather reads a sequence's blocks in ascending block number instead of table order.

While blocks are handed out in order the two agree; once freed blocks are reused, a sequence's
later tokens can sit in a lower-numbered block, and gather returns them out of order.
"""

CAUGHT_BY = [
    "test_pool_holds_the_tokens_where_the_block_table_says",
    "test_interleaved_appends_gather_back_exactly",
]
EDITS = [
    (
        "table = torch.tensor(self.tables[seq_id], device=self.k_pool.device)",
        "table = torch.tensor(sorted(self.tables[seq_id]), device=self.k_pool.device)",
    ),
]
