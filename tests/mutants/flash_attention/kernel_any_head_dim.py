"""Bug: the kernel's launcher does not check the head dim.

tl.arange needs a power of two and tl.dot at least 16: another D fails deep inside Triton with
an error that does not say what was wrong, or silently computes on a padded tile.
"""

CAUGHT_BY = ["test_flash_attention_refuses_bad_inputs"]
EDITS = [
    (
        """    if D not in _KERNEL_HEAD_DIMS:
        raise ValueError(f"the kernel supports head dims D in {_KERNEL_HEAD_DIMS}, got D={D}")
""",
        "",
    ),
]
