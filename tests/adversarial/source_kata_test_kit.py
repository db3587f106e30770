"""Cheat: a kata's test kit reached through its package, next to the solution it may import.

`import katas.moe.solution` is allowed; the kit the tests use (`katas.moe.cases`, loaded by the
time the solution runs) is then an attribute of the same package, and its helpers are the judge's.
Caught before the file is imported: of katas/, only the `solution` modules may be reached.
"""

KATA = "serving"
CHECK = "source"
TESTS = ["test_each_expert_runs_only_on_its_tokens"]
EXPECT = "of katas/, a solution may use only the katas' `solution` modules"
EDITS = [
    ("import math\n", "import math\n\nimport katas.moe.solution\n"),
    (
        "def _check_int(name: str, value, least: int) -> None:\n",
        "KIT = katas.moe.cases  # the tests' own helpers\n\n\n"
        "def _check_int(name: str, value, least: int) -> None:\n",
    ),
]
