"""A learner's tools, on top of the judge and the grader.

- `progress.py`: every run of a kata's tests on `solution.py` remembered in levels (a pytest
  plugin the repository's conftest.py loads), and `nox -s progress`'s table;
- `tools.py`: `nox -s hint`, `reset` and `watch` (`python -m grading.learner.tools`);
- `interview.py`: practice against the clock (`nox -s interview`), judged by the grader's
  sandbox at the end.

It may import from every layer below it (`grading.grade`, `grading.judge`, `grading.model`,
`grading.devices`); nothing below imports it.
"""
