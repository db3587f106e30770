"""Bug: a block that fills up is registered under its key even when another block has it already.

`cached[key] = block` overwrites: the newest copy wins. The block registered first, which other
sequences may be sharing, drops out of the index while its contents still sit in the pool, and
a later start is handed a different block than the rules name.
"""

CAUGHT_BY = ["test_a_duplicate_block_leaves_the_registered_one"]
EDITS = [
    (
        "            if key not in self.cached:  # a block already registered under the key stays\n"
        "                self.cached[key] = table[i]\n",
        "            if True:  # the newest block registered under the key wins\n"
        "                self.key_of.pop(self.cached.get(key), None)\n"
        "                self.cached[key] = table[i]\n",
    ),
]
