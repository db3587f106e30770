"""Grading: a submission that loads its own kata's reference from the grader's copy of the
repository instead of solving it. The kata scores zero: "broke the grading rules"."""

import runpy
import sys
from pathlib import Path

# The environment lives in <repository>/.nox/katas, so the repository is two folders up.
_reference = Path(sys.prefix).parents[1] / "reference" / "context_extension.py"
globals().update(runpy.run_path(str(_reference)))
