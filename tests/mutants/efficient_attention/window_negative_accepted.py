"""Bug: sliding_window_attention rejects window=0 but lets a negative or fractional window through.

Checking `window == 0` covers the case one thinks of; -3 or 2.5 then fail deep inside with
another error, or return nonsense.
"""

CAUGHT_BY = [
    "test_sliding_window_bad_input_raises_value_error",
]
EDITS = [
    (
        '    _check_int("window", window, 1)\n',
        ('    if window == 0:\n        raise ValueError("window must be >= 1")\n'),
    ),
]
