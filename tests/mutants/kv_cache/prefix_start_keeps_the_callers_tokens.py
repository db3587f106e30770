"""Bug: start keeps the caller's `tokens` list as the sequence's ids, and append makes the keys of
the blocks it fills from that list.

Keeping "the sequence's token ids" and hashing the whole prefix when a block fills is a natural
way to build chained keys, and `self.ids[seq_id] = tokens` looks like storing a value. But it is
the caller's list: a caller that reuses it after start (a batch buffer, `tokens[:] = ...`)
changes the prefix the cache reads, and the block that fills next is registered under a key of
tokens the sequence never held.
"""

CAUGHT_BY = ["test_the_lists_given_may_be_reused"]
EDITS = [
    (
        "        self.tail: dict = {}  # seq_id -> the token ids in its partial last block\n",
        "        self.tail: dict = {}  # seq_id -> the token ids in its partial last block\n"
        "        self.ids: dict = {}  # seq_id -> its token ids\n",
    ),
    (
        "        self.tail[seq_id] = []\n        return len(found) * self.block_size\n",
        "        self.tail[seq_id] = []\n"
        "        self.ids[seq_id] = tokens  # the prompt's ids, for the keys of later blocks\n"
        "        return len(found) * self.block_size\n",
    ),
    (
        "        for i in range(length // bs, (length + T) // bs):",
        "        ids = self.ids[seq_id] = self.ids.get(seq_id, [])[:length] + tokens\n"
        "        for i in range(length // bs, (length + T) // bs):",
    ),
    (
        "            key, tail = (key, tuple(tail[:bs])), tail[bs:]\n",
        "            key, tail = None, tail[bs:]\n"
        "            for j in range(i + 1):  # the chain of every block up to this one\n"
        "                key = (key, tuple(ids[j * bs : (j + 1) * bs]))\n",
    ),
    (
        "        for per_sequence in (self.lengths, self.last_key, self.tail):\n"
        "            del per_sequence[seq_id]\n",
        "        for per_sequence in (self.lengths, self.last_key, self.tail):\n"
        "            del per_sequence[seq_id]\n"
        "        self.ids.pop(seq_id, None)\n",
    ),
]
