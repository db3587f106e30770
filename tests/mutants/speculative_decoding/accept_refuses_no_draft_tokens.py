"""Bug: accept_reject checks the draft tokens' range with .min() and .max(), which fail for k = 0.

`draft_tokens.max() >= V` reads naturally as a range check, but the max of an empty tensor is
an error: a round with nothing proposed (the last round of a decoding can be one) crashes
instead of sampling its one token from p[0].
"""

CAUGHT_BY = [
    "test_with_no_draft_tokens_the_token_comes_from_p",
    "test_with_no_draft_tokens_the_token_has_p_s_distribution",
]
EDITS = [
    (
        "    if ((draft_tokens < 0) | (draft_tokens >= V)).any():",
        "    if int(draft_tokens.min()) < 0 or int(draft_tokens.max()) >= V:",
    ),
]
