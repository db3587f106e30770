"""Bug: the float64 frequencies are remembered per (head_dim, base) and reused on later calls.

Every result is still a new float32 tensor, so no caller sees a shared one; but a repeated call
computes nothing, and the README asks for answers computed when asked (functools.cache on the
helper every frequency function shares).
"""

CAUGHT_BY = ["test_frequencies_are_computed_when_asked"]
EDITS = [
    ("import math\n", "import functools\nimport math\n"),
    (
        "def _inv_freq64(head_dim: int, base: float)",
        "@functools.cache\ndef _inv_freq64(head_dim: int, base: float)",
    ),
]
