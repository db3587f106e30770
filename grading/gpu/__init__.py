"""The GPU tools, on top of the judge and the grader.

- `check.py`: the prepared GPU check (`python3 -m grading.gpu.check` on a GPU machine), planned
  from the rehearsal's estimates (`grading/judge/rehearsal.py`), with its figures and table;
- `aot.py` and `aot_worker.py`: Triton kernels compiled ahead of time for GPUs that are not
  there; `kernel_report.py`: what those kernels would use (registers, spills, tensor cores).

It may import from every layer below it (`grading.grade`, `grading.judge`, `grading.model`,
`grading.devices`); nothing below imports it. Where code runs and how a call is timed are in
`grading.devices`, at the bottom, for the judge and for solutions.
"""
