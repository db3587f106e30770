"""Bug: RollingKVCache counts its tokens in a 16-bit integer.

Two bytes look like plenty for a counter, and every test of a few thousand steps passes. Past
32767 tokens the count wraps around to -32768: seq_len goes negative, RoPE rotates the next
tokens to the wrong positions, and append returns the wrong slots.
"""

CAUGHT_BY = ["test_decoding_past_32767_tokens_keeps_counting"]
EDITS = [
    ("import math\n", "import ctypes\nimport math\n"),
    (
        "        self._seq_len = 0\n",
        "        self._seq_len = ctypes.c_int16(0)  # wraps around like an int16 tensor\n",
    ),
    (
        "        return self._seq_len\n",
        "        return self._seq_len.value\n",
    ),
    (
        "        slot = self._seq_len % self.window\n",
        "        slot = self._seq_len.value % self.window\n",
    ),
    (
        "        self._seq_len += 1\n",
        "        self._seq_len.value += 1\n",
    ),
    (
        "        n = min(self._seq_len, self.window)\n",
        "        n = min(self._seq_len.value, self.window)\n",
    ),
]
