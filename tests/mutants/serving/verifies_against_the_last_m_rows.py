"""Bug: the target's choices are read from the last m rows of its logits, not the last m + 1.

Off by one: m proposals make m + 1 predictions (one after each prefix, plus the bonus). With m
rows each proposal is checked against the target's choice after itself, and a round with no
proposals reads every row of a prompt.
"""

CAUGHT_BY = ["test_speculative_serve_tokens_equal_naive_serve_within_every_budget"]
EDITS = [
    (
        "            best = out[-(m + 1) :].argmax(dim=-1).tolist()",
        "            best = out[-m:].argmax(dim=-1).tolist() + [int(out[-1].argmax())]",
    ),
]
