"""Bug: generate refuses when the prompt plus the new tokens exactly fill max_seq_len.

`>=` where `>` belongs: the model has max_seq_len positions, 0..max_seq_len - 1, and a sequence
that uses all of them is allowed.
"""

CAUGHT_BY = [
    "test_generate_may_fill_max_seq_len_exactly",
    "test_generate_long_prompt_up_to_max_seq_len",
]
EDITS = [
    ("if T + max_new_tokens > c.max_seq_len:", "if T + max_new_tokens >= c.max_seq_len:"),
]
