"""Bug: the token budget counts only joining prompts, not the running requests' tokens.

Thinking of max_tokens_per_step as a cap on new prefill work forgets that every decode and every
continuing chunk is a token through the model too; calls then exceed the budget.
"""

CAUGHT_BY = ["test_chunked_prefill_is_exact_and_stays_within_the_budget"]
EDITS = [
    (
        "                batch.append((seq, n))\n                budget -= n\n",
        "                batch.append((seq, n))\n",
    ),
]
