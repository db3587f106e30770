"""Cheat: the implementation writes its own entry into the counters' table of operators.

The counters look each operator up once and keep what they learnt in a table; an entry for the
matrix product without its FLOP formula makes every matmul free. Caught because each entry of
that table is checked against what the counters themselves would have written.
"""

KATA = "kv_cache"
TESTS = ["test_kv_cache_bytes_of_real_models"]
EXPECT = "grading.judge.observe._INFO"
EDITS = [
    (
        "import torch\n",
        "import torch\n\n"
        "import grading.judge.observe\n"
        "import grading.judge.operators\n\n"
        "for _mm in (torch.ops.aten.mm.default, torch.ops.aten.bmm.default):\n"
        "    grading.judge.observe._INFO[id(_mm)] = grading.judge.operators.OpInfo(\n"
        '        "mm", None, None, False, False, False, (), _mm\n'
        "    )\n",
    ),
]
