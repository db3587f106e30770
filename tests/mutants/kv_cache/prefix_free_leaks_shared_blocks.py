"""Bug: free gives back only the blocks the sequence held alone; shared ones keep their count.

The private blocks are handled ("count 1: free it") and the shared ones skipped ("someone else
still needs it"), but their count is never lowered: when the last holder goes, the count never
reaches 0 and the blocks leak out of the pool for good.
"""

CAUGHT_BY = ["test_freeing_one_of_two_sharers_keeps_the_other"]
EDITS = [
    (
        "            self.refs[block] -= 1\n            if self.refs[block] == 0:\n",
        "            if self.refs[block] == 1:\n                self.refs[block] = 0\n",
    ),
]
