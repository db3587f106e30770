"""Bug: the cache keeps the k and v it is given, next to its preallocated storage.

Holding on to the caller's tensors "for later" looks harmless, but the memory is then counted
twice, and the caller may overwrite those tensors at any time.
"""

CAUGHT_BY = ["test_cache_holds_exactly_what_the_formula_says"]
EDITS = [
    (
        "        self.lengths[layer] = start + T\n        return self.k[layer",
        "        self.lengths[layer] = start + T\n"
        "        self.given = getattr(self, 'given', []) + [(k, v)]\n"
        "        return self.k[layer",
    ),
]
