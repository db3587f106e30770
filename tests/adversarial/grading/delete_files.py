"""Grading: a submission that deletes the grader's results file (outside its sandbox).
The kata scores zero: "broke the grading rules"."""

import os
from pathlib import Path

Path(os.environ["KATAS_GRADE_RESULTS"]).unlink()
