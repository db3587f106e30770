"""`python -m grading.grade PATH [options]`: see grading/grade/cli.py."""

import sys

from grading.grade.cli import main

sys.exit(main())
