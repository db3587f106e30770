"""Grading: a submission that floods the output. The kata scores zero: "flooded the output"."""

import sys

while True:
    sys.stdout.write("x" * 1_000_000)
