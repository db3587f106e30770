"""Grading submissions and classes: `python -m grading.grade` (`cli.py`).

- `cli.py`: the command; `task.py`: one kata of one submission, the unit every backend runs;
- `sandbox.py`: that run, in a private copy of the repository, in a process of its own, with
  `plugin.py` (the pytest plugin inside it: results file, audit hook, per-test CPU limits);
- `limits.py`: the CPU-time limits, calibrated on the references; `assignment.py`: what is
  assigned and how it scores; `reports.py`: grade.json, junit.xml, summary.md, the class's
  tables; `backends.py`: where tasks run (threads here, or a Ray cluster).

It imports from `grading.judge`, `grading.model` and `grading.devices`; the learner's and the
GPU tools may import it, never the other way round.
"""
