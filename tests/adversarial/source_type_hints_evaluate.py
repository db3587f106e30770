"""Cheat: `typing.get_type_hints` as `eval` by another name.

An annotation held in a variable is a string that `get_type_hints` evaluates with any names it
is given: `exec`, `torch._C`, the judge's modules, whatever the string says, and none of it
written as code the source check reads. Caught before the file is imported: typing's evaluators
(`get_type_hints`, `ForwardRef`) are refused like `eval`.
"""

KATA = "moe"
CHECK = "source"
TESTS = ["test_expert_work_grows_with_k_not_with_E"]
EXPECT = "`typing.get_type_hints` is not on the list of allowed modules"
EDITS = [
    ("import math\n", "import math\nimport typing\n"),
    (
        "def _check_k(k: int, num_experts: int) -> None:\n",
        "def _evaluate(expr):\n"
        "    def holder(x: expr):\n"
        "        pass\n\n"
        "    return typing.get_type_hints(holder)['x']\n\n\n"
        "def _check_k(k: int, num_experts: int) -> None:\n",
    ),
]
