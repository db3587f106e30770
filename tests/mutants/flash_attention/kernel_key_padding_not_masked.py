"""Bug: keys past the end are loaded as zeros but not masked out of the softmax.

The loads are masked, so nothing reads out of bounds and the code looks safe; but a zero key
still has score 0 and adds exp(0 - m) to the running sum.
"""

CAUGHT_BY = [
    "test_flash_attention_passes_constant_values_through",
    "test_flash_attention_matches_oracle",
]
EDITS = [
    (
        """            visible = cols[None, :] < hi  # padding past the range is not a key
            if CAUSAL:
                visible = visible & (cols[None, :] <= offs_m[:, None] + causal_shift)
            s = tl.where(visible, s, float("-inf"))""",
        """            if CAUSAL:
                visible = cols[None, :] <= offs_m[:, None] + causal_shift
                s = tl.where(visible, s, float("-inf"))""",
    ),
]
