"""Bug: rope_inv_freq remembers its result for each (head_dim, base) and returns that tensor.

The frequencies of a model never change, so computing them once looks free (functools.cache),
but the caller owns what it is given: code that scales inv_freq in place (`inv_freq /= factor`)
changes the remembered tensor, and every later call gets the scaled one.
"""

CAUGHT_BY = ["test_tables_are_the_callers_own"]
EDITS = [
    ("import math\n", "import functools\nimport math\n"),
    (
        "def rope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:",
        "@functools.cache\n"
        "def rope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:",
    ),
]
