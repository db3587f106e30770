"""Bug: the log-sum-exp is m + log2(l): the max in natural-log units, the sum in base 2.

The kernel computes its exponentials with exp2, so log2 is the logarithm at hand; the mix is
invisible in the output and only shows when partial results are merged through lse.
"""

CAUGHT_BY = ["test_flash_attention_with_lse_returns_the_log_sum_exp"]
EDITS = [
    (
        "m_i + tl.math.log(l_safe)",
        "m_i + tl.math.log2(l_safe)",
    ),
]
