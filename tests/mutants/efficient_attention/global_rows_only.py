"""Bug: global blocks read every block, but the other blocks do not read them back.

Global tokens work both ways (BigBird's ITC): marking only the rows gives the global blocks a
view of everything but nobody a view of them.
"""

CAUGHT_BY = [
    "test_block_patterns_worked_example",
    "test_global_block_mask_reads_and_is_read_by_all",
]
EDITS = [
    (
        "    mask[:, :n_global] = True  # and every query reads the global keys\n",
        "",
    ),
]
