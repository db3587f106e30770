"""Bug: block_sparse_attention casts block_size with int() before checking it.

block_size=2.5 silently becomes 2 (and 3.0 becomes 3): the call runs on blocks the caller never
asked for, where the README asks for a ValueError naming block_size (an int >= 1).
"""

CAUGHT_BY = ["test_block_sparse_bad_input_raises_value_error"]
EDITS = [
    (
        '    _check_int("block_size", block_size, 1)\n    bs = block_size\n',
        '    block_size = int(block_size)\n    _check_int("block_size", block_size, 1)\n'
        "    bs = block_size\n",
    ),
]
