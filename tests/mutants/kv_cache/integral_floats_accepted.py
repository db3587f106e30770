"""Bug: sizes are checked by value, so a float of integer value passes as an int.

kv_cache_bytes(2.0, 3, 10, 6, 1, float32) returns 2880.0, a float, where the README asks for a
ValueError naming n_layers (a positive int); KVCache(2, 1, 3, 10.0, 6) is accepted too.
"""

CAUGHT_BY = ["test_bad_input_raises_value_error"]
EDITS = [
    (
        "        if not isinstance(value, int) or isinstance(value, bool) or value < 1:\n",
        "        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 1 "
        "or value != int(value):\n",
    ),
]
