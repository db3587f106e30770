"""Bug: decoding rotates q_t and k_t to the ring-buffer slot (seq_len % window), not the position.

The slot is where the key is stored, not where the token is: once the buffer wraps, positions
restart at 0 and distances between queries and keys come out wrong.
"""

CAUGHT_BY = [
    "test_decoding_rope_position_keeps_counting",
    "test_decoding_equals_sliding_window_attention",
]
EDITS = [
    (
        "    position = cache.seq_len  # absolute: it keeps counting after the buffer wraps\n",
        "    position = cache.seq_len % cache.window\n",
    ),
]
