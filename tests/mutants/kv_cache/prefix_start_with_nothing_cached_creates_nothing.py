"""Bug: when nothing is cached, start returns 0 without creating the sequence.

With no block to hand over there seems to be nothing to record, and append creates an unknown
sequence anyway. But start promised a sequence: until its first append, gather and free of it
raise, and a second start of the same id is accepted instead of refused.
"""

CAUGHT_BY = [
    "test_shared_prefixes_gather_back_exactly",
    "test_shared_blocks_are_never_written",
]
EDITS = [
    (
        "        found, key = self._cached_run(tokens)\n        for block in found:\n",
        "        found, key = self._cached_run(tokens)\n"
        "        if not found:  # nothing to share: append creates the sequence\n"
        "            return 0\n"
        "        for block in found:\n",
    ),
]
