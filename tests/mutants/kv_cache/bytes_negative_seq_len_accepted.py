"""Bug: kv_cache_bytes checks that seq_len is an int but not that it is >= 0.

The other sizes must be positive and get one shared check; seq_len may be 0, so it gets its own,
and the sign is forgotten: a negative length returns a negative number of bytes.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error"]
EDITS = [
    (
        "if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 0:",
        "if not isinstance(seq_len, int) or isinstance(seq_len, bool):",
    ),
]
