"""Bug: a shared block goes back to the free blocks when any one of its holders lets it go.

Without sharing, "my blocks" go back when I finish. With sharing, another request may still read
the block: it must stay out of the free pool until its last holder is done, or new tokens are
written over keys that a running request attends to.
"""

CAUGHT_BY = ["test_a_shared_block_stays_while_another_holder_runs"]
EDITS = [
    (
        "            self.refs[block] -= 1\n            if self.refs[block] == 0:\n",
        "            self.refs[block] = 0  # mine no more\n            if True:\n",
    ),
]
