"""Cheat: the implementation takes the efficient path only when it sees it is being graded.

It reads the environment (the grader's variables, pytest's current test) and computes densely
everywhere else, so a course's grade says nothing of the code a student runs. No test can see
a difference the code makes only outside tests; caught before the file is imported: the source
check refuses reading the environment (and the stack, and the loaded modules).
"""

KATA = "efficient_attention"
CHECK = "source"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "`.environ` reads the environment"
EDITS = [
    (
        "import torch\n",
        "import os\n\nimport torch\n\nGRADED = 'PYTEST_CURRENT_TEST' in os.environ\n",
    ),
]
