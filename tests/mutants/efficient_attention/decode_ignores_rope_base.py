"""Bug: sliding_window_decode_step rotates with base 10000 whatever rope_base it is given.

The default is right, so decoding with the default passes; a model trained with another base
(or extended with a larger one) gets the wrong angles.
"""

CAUGHT_BY = [
    "test_decoding_equals_sliding_window_attention",
]
EDITS = [
    (
        "    q_rot = _rope(q_t.to(acc), position, rope_base)",
        "    q_rot = _rope(q_t.to(acc), position, 10000.0)",
    ),
    (
        "cache.append(_rope(k_t.to(acc), position, rope_base), v_t)",
        "cache.append(_rope(k_t.to(acc), position, 10000.0), v_t)",
    ),
]
