"""Bug: with no draft tokens, accept_reject returns a sample of p[0] before checking anything.

k = 0 is a corner worth handling first, and nothing is left to check with no tokens; but the
README's errors hold on every path: a float draft_tokens [0], or p and q of the wrong shapes,
are still bad input, and the early return passes them silently.
"""

CAUGHT_BY = ["test_accept_bad_input_with_no_draft_tokens_raises_value_error"]
EDITS = [
    (
        "    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.dim() != 1:\n",
        "    if isinstance(draft_tokens, torch.Tensor) and draft_tokens.numel() == 0:\n"
        "        return _sample(p[0], generator)\n"
        "    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.dim() != 1:\n",
    ),
]
