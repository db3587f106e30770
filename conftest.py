# The kata harness (grading/plugin.py): --impl, Hypothesis profiles, Triton's interpreter, figures.
pytest_plugins = ["grading.plugin"]
