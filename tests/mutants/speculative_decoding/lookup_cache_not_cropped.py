"""Bug: prompt_lookup_decode never rolls the target's cache back.

With no draft model there is only one cache to crop, and it is easy to forget: rejected
proposals stay in it and corrupt every later token.
"""

CAUGHT_BY = ["test_prompt_lookup_output_is_the_targets_greedy"]
EDITS = [
    (
        "        cache.crop(n - 1)\n",
        "",
    ),
]
