"""Bug: the kernel accepts any head dim that is a multiple of 16 up to 128 (48, 80, 96, 112).

tl.dot wants an inner size of at least 16, so "a multiple of 16" sounds like the rule; but every
tl.arange must be a power of two, and a head dim of 48 is not one: Triton refuses it deep inside
the launch, or the kernel pads the tile, instead of a ValueError naming D.
"""

CAUGHT_BY = [
    "test_flash_attention_refuses_bad_inputs",
    "test_flash_attention_with_lse_refuses_bad_inputs",
    "test_split_kv_decode_refuses_bad_inputs",
]
EDITS = [
    (
        "    if D not in _KERNEL_HEAD_DIMS:\n",
        "    if D % 16 or not 16 <= D <= 128:\n",
    ),
]
