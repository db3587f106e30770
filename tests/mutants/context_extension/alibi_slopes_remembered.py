"""Bug: alibi_slopes remembers its tensor for each head count and returns that same tensor.

The slopes of a model never change, so computing them once looks free (functools.cache), but the
caller owns what it is given: code that changes the slopes in place changes the remembered
tensor, and every later call, alibi_bias included, gets the changed one.
"""

CAUGHT_BY = ["test_alibi_slopes_are_the_callers_own"]
EDITS = [
    ("import math\n", "import functools\nimport math\n"),
    ("def alibi_slopes(n_heads: int)", "@functools.cache\ndef alibi_slopes(n_heads: int)"),
]
