"""Cheat: the `grading` package passed around as a value, to reach its judge by a plain name.

`package = grading` and then `package.learner` or `package.judge`: a chain that no longer starts
at the imported name. Caught before the file is imported: a repository package bound by an
import may only start an attribute chain (`grading.model.make_model`), never be a value.
"""

KATA = "moe"
CHECK = "source"
TESTS = ["test_expert_work_grows_with_k_not_with_E"]
EXPECT = "uses the package `grading` as a value"
EDITS = [
    ("import math\n", "import math\n\nimport grading.model\n"),
    (
        "def _check_k(k: int, num_experts: int) -> None:\n",
        "PACKAGE = grading  # anything below it, by attribute, later\n\n\n"
        "def _check_k(k: int, num_experts: int) -> None:\n",
    ),
]
