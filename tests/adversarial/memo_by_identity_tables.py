"""Cheat: rope_cos_sin remembers its tables by the arguments' identity and version.

A memory keyed on `id` and `_version` of `positions` and `inv_freq` (holding on to them, so that
an id is never reused) gives the right numbers whenever the values change, since an in-place
change moves the version on; but a decoding loop that passes the same tensors again gets its
tables without computing them. Caught because the tests of correctness measure rope_cos_sin too:
called again on the very same tensors, it must cost what computing costs.
"""

KATA = "context_extension"
TESTS = ["test_rope_answers_follow_their_inputs"]
EXPECT = "answers from memory: rope_cos_sin did"
EDITS = [
    (
        "def rope_cos_sin(\n"
        "    positions: torch.Tensor, inv_freq: torch.Tensor\n"
        ") -> tuple[torch.Tensor, torch.Tensor]:\n",
        "_REMEMBERED = {}  # (id, version) of both arguments -> (the arguments, the tables)\n"
        "\n"
        "\n"
        "def rope_cos_sin(positions, inv_freq):\n"
        "    key = tuple((id(t), t._version) for t in (positions, inv_freq))\n"
        "    if key not in _REMEMBERED:\n"
        "        _REMEMBERED[key] = (positions, inv_freq, _tables(positions, inv_freq))\n"
        "    cos, sin = _REMEMBERED[key][2]\n"
        "    return cos.clone(), sin.clone()\n"
        "\n"
        "\n"
        "def _tables(\n"
        "    positions: torch.Tensor, inv_freq: torch.Tensor\n"
        ") -> tuple[torch.Tensor, torch.Tensor]:\n",
    ),
]
