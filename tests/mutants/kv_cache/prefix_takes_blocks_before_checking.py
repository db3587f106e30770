"""Bug: append takes free blocks one at a time and raises OutOfBlocks when the queue runs dry,
then puts them back.

The blocks are returned, so nothing leaks; but taking a cached block evicts it, and a refused
append has thrown away cached prefixes (and reordered the queue) for nothing.
"""

CAUGHT_BY = ["test_out_of_blocks_changes_nothing"]
EDITS = [
    (
        "        if more > len(self.queue):  # refuse before taking any: nothing changes\n",
        "        if more > len(self.queue):  # take what there is, then give it back\n"
        "            for block in [self._take() for _ in range(len(self.queue))]:\n"
        "                self.refs[block] = 0\n"
        "                self.queue[block] = None\n",
    ),
]
