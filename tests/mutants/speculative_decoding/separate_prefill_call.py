"""Bug: the target first prefills the prompt and picks the first token on its own.

That is how plain decoding starts, so it feels natural; but the prompt could have been read in
the same call that checks the first proposals: one extra target call, and a perfect draft no
longer makes k + 1 tokens per call.
"""

CAUGHT_BY = ["test_a_copy_of_the_target_is_always_accepted"]
EDITS = [
    (
        "    n = T  # tokens committed; out[:, n:] is scratch space for proposals\n",
        (
            "    out[0, T] = _sample(_probs(target(prompt_ids, target_cache)[0, "
            "-1], temperature), generator)[0]\n"
            "    stats.target_calls += 1\n"
            "    n = T + 1\n"
        ),
    ),
]
