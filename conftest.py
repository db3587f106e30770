# The kata harness (grading/judge/plugin.py: --impl, Hypothesis profiles, Triton's interpreter,
# figures) and the learner's progress in levels (grading/learner/progress.py).
pytest_plugins = ["grading.judge.plugin", "grading.learner.progress"]
