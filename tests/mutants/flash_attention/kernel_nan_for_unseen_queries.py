"""Bug: the final division by l has no guard, so a query that sees no key returns 0 / 0 = NaN.

With bottom-right causal masking and more queries than keys, the first Nq - Nk queries see
nothing; tests with Nq == Nk never meet them.
"""

CAUGHT_BY = ["test_flash_attention_gives_zeros_where_a_query_sees_no_key"]
EDITS = [
    (
        "out = acc / l_safe[:, None]",
        "out = acc / l_i[:, None]",
    ),
]
