"""Bug: ALiBi slopes are 2 ** (-8h / n) for every head count, powers of two or not.

The power-of-two formula is the one everybody remembers; for 12 or 40 heads (BLOOM, MPT-style
configs) the paper uses the slopes of the power of two below, then interleaved extra slopes.
"""

CAUGHT_BY = ["test_alibi_slopes_known_values", "test_alibi_slopes_match_the_paper"]
EDITS = [
    (
        (
            "    slopes = _geometric_slopes(closest)\n"
            "    slopes += _geometric_slopes(2 * closest)[0::2][: n_heads - closest]\n"
        ),
        "    slopes = _geometric_slopes(n_heads)\n",
    ),
]
