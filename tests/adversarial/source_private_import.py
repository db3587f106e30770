"""Cheat: a private PyTorch module imported by a name the import list does not spell out.

`from torch.utils._pytree import tree_map` (or any `torch.<private>`): `torch` is allowed, and the
list of refused modules cannot name every private one. Caught before the file is imported: no
module path or imported name may be private (`_x`).
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "imports `torch.utils._pytree`"
EDITS = [
    ("import math\n", "import math\n\nfrom torch.utils._pytree import tree_map\n"),
]
