"""Bug: the launcher scales q by sm_scale and the kernel scales the scores again.

Scaling q first is a common trick (it saves a multiply per score); kept next to the kernel's
own scaling it squares the scale.
"""

CAUGHT_BY = ["test_flash_attention_matches_oracle"]
EDITS = [
    (
        """    config = _tile_config(q)
""",
        """    q = q * _softmax_scale(sm_scale, D)  # pre-scale the queries
    config = _tile_config(q)
""",
    ),
]
