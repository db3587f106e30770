"""Bug: every block that fills up records its key, a private duplicate too, and taking a
duplicate from the free queue deletes its key's entry, which names the registered block.

Recording the key of every full block looks uniform, and `cached.pop(key, None)` silences the
KeyError a second delete would raise. But a duplicate's key is not its own entry: when the
duplicate is evicted, the registered block, still cached, unchanged, maybe still shared, is
unregistered, and later prompts recompute a prefix that is sitting in the pool.
"""

CAUGHT_BY = ["test_match_is_pure_and_exact", "test_prefix_workload_follows_the_rules"]
EDITS = [
    (
        "            del self.cached[key]\n",
        "            self.cached.pop(key, None)\n",
    ),
    (
        "                self.cached[key] = table[i]\n"
        "                self.key_of[table[i]] = key\n",
        "                self.cached[key] = table[i]\n"
        "            self.key_of[table[i]] = key  # a duplicate's too\n",
    ),
]
