"""Bug: combine_partials weighs each part by exp(lse_s) without subtracting the largest lse.

The weights exp(lse_s) / sum exp(lse_s) are right on paper, and the test inputs people try first
have small scores; an lse past 88 makes exp() infinite in float32 and the merge inf / inf = NaN.
"""

CAUGHT_BY = [
    "test_combine_partials_merges_exact_parts",
    "test_combine_partials_runs_in_float32_for_any_input_dtype",
]
EDITS = [
    (
        "weights = torch.exp(lses - m_safe)",
        "weights = torch.exp(lses)",
    ),
    (
        "return out, m_safe + torch.log(total)",
        "return out, torch.log(total)",
    ),
]
