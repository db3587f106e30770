"""Cheat: generate returns a tensor that carries a finaliser, which rewrites the caller's prompt
through `.data` once the caller drops the result.

When the call returns the prompt is exactly as it was, so every check at that moment passes;
the change comes later, outside any call, and `.data` leaves the prompt's version counter
alone. Caught because the guard keeps each tensor a test's calls were given, as the latest call
left it, and compares it again, bit for bit, when the test ends.
"""

KATA = "kv_cache"
TESTS = ["test_generate_matches_the_uncached_generator"]
EXPECT = "generate changed its argument `prompt_ids` after it returned"
EDITS = [
    (
        "# Level 3: a paged cache\n",
        "class _Later:\n    def __init__(self, ids):\n        self.ids = ids\n\n"
        "    def __del__(self):\n        self.ids.data[0, -1] = self.ids.data[0, -1] ^ 1\n\n\n"
        "# Level 3: a paged cache\n",
    ),
    (
        "    return out\n",
        "    out.later = _Later(prompt_ids)\n    return out\n",
    ),
]
