"""Bug: crop checks `length` against max_seq_len instead of seq_len, and sets every layer to it.

Both bound the cache, so the wrong one is easy to pick; crop(seq_len + 1) then "grows" the cache
into slots that were never written, and the next step attends to zeros.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error"]
EDITS = [
    ("or not 0 <= length <= self.seq_len", "or not 0 <= length <= self.max_seq_len"),
    (
        "self.lengths = [min(n, length) for n in self.lengths]",
        "self.lengths = [length] * len(self.lengths)",
    ),
]
