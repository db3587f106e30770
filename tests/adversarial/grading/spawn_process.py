"""Grading: a submission that starts a process of its own (which could do anything outside the
rules). The kata scores zero: "broke the grading rules"."""

import subprocess

subprocess.run(["true"], check=False)
