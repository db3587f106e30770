"""Bug: combine_partials weighs and sums the parts in their own dtype and converts only the result.

Partial results from a float16 kernel look ready to use as they are; the weights exp(lse - max)
and the weighted sum then lose three decimal digits before the final conversion to float32.
"""

CAUGHT_BY = ["test_combine_partials_runs_in_float32_for_any_input_dtype"]
EDITS = [
    (
        """    lses = lses.float()
""",
        "",
    ),
    (
        "out = (weights[..., None] * outs.float()).sum(dim=0)",
        "out = (weights[..., None] * outs).sum(dim=0)",
    ),
    (
        "return out, m_safe + torch.log(total)",
        "return out.float(), (m_safe + torch.log(total)).float()",
    ),
]
