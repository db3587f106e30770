"""Bug: alibi_bias counts positions with a float32 arange.

`torch.arange(k_len, dtype=torch.float32)` saves a conversion, and every distance up to 10^5 is
exact. Past 2**24 keys float32 can no longer count by one: neighbouring keys round to the same
position, and the bias next to the newest key is off by a whole slope.
"""

CAUGHT_BY = ["test_alibi_bias_past_two_to_the_24_keys"]
EDITS = [
    (
        "    query_pos = torch.arange(q_len) + (k_len - q_len)  # (Nq,)\n"
        "    distance = query_pos[:, None] - torch.arange(k_len)[None, :]  # (Nq, Nk)\n",
        "    query_pos = torch.arange(q_len, dtype=torch.float32) + (k_len - q_len)  # (Nq,)\n"
        "    distance = query_pos[:, None] - torch.arange(k_len, dtype=torch.float32)[None, :]\n",
    ),
]
