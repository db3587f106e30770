"""The katas. Importing any of them (`from katas.flash_attention.solution import ...`) first
switches Triton to its CPU interpreter when there is no GPU, as the test harness does, so a
plain script can call a kata's kernels on a CPU-only machine. Import the kata before `triton`.
"""

from grading.devices import use_triton_interpreter_without_gpu

use_triton_interpreter_without_gpu()
