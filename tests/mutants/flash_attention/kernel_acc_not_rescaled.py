"""Bug: the kernel rescales the running sum l when the max grows, but not the accumulator acc.

Both carry exp(s - m_old) factors, but acc is updated by a dot product a few lines further
down and the rescale is easy to leave out there.
"""

CAUGHT_BY = ["test_flash_attention_matches_oracle"]
EDITS = [
    (
        """        acc = acc * alpha[:, None]
""",
        "",
    ),
]
