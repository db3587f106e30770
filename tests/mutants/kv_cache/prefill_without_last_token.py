"""Bug: generate prefills the prompt minus its last token, then feeds that token alone.

A pattern copied from decoders that "prime" the cache. The tokens come out right, but it makes
one extra model call, breaking the contract: one call on the whole prompt, then one per token.
"""

CAUGHT_BY = ["test_generate_calls_the_model_once_per_token"]
EDITS = [
    (
        "    logits = model(prompt_ids, cache)  # (B, T, vocab): the prefill\n",
        "    if T > 1:\n"
        "        model(prompt_ids[:, :-1], cache)\n"
        "    logits = model(prompt_ids[:, -1:], cache)\n",
    ),
]
