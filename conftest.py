# The kata harness: --impl, Hypothesis profiles, Triton's CPU interpreter, figures (grading/plugin.py).
pytest_plugins = ["grading.plugin"]
