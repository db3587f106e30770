"""Bug: gather of an unknown sequence returns empty tensors instead of raising.

`self.tables.get(seq_id, [])` makes the missing case "just work": a typo in a sequence id, or a
read after free, then attends over nothing instead of failing loudly.
"""

CAUGHT_BY = ["test_paged_bad_input_raises_value_error"]
EDITS = [
    (
        "    def gather(self, seq_id):\n"
        '        """Everything cached for `seq_id`, in order: k, v of shape [Hkv, length, D]."""\n'
        "        if seq_id not in self.tables:\n"
        '            raise ValueError(f"seq_id: unknown sequence {seq_id!r} '
        '(never appended, or freed)")\n'
        "        table = torch.tensor(self.tables[seq_id], device=self.k_pool.device)\n"
        "        n = self.lengths[seq_id]\n",
        "    def gather(self, seq_id):\n"
        '        """Everything cached for `seq_id`, in order: k, v of shape [Hkv, length, D]."""\n'
        "        table = torch.tensor(self.tables.get(seq_id, []), dtype=torch.long)\n"
        "        n = self.lengths.get(seq_id, 0)\n",
    ),
]
