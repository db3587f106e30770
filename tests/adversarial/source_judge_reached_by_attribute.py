"""Cheat: the judge's counters switched off from inside the call, reached as an attribute.

`import grading.model` is allowed, and once the judge has loaded `grading.judge`, it is an
attribute of the `grading` package: `grading.judge.observe` holds the counters' dispatch mode,
whose methods a submission could swap for a pass-through while it works and put back before it
returns, so the call looks untouched afterwards. Caught before the file is imported: of grading/,
only the model, the naive server and devices may be reached, by import or by attribute.
"""

KATA = "moe"
CHECK = "source"
TESTS = ["test_expert_work_grows_with_k_not_with_E"]
EXPECT = "the judge's package (grading.judge)"
EDITS = [
    ("import math\n", "import math\n\nimport grading.model\n"),
    (
        "def _check_k(k: int, num_experts: int) -> None:\n",
        "JUDGE = grading.judge  # the counters' module, to patch during a call\n\n\n"
        "def _check_k(k: int, num_experts: int) -> None:\n",
    ),
]
