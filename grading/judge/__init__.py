"""The judge: what runs inside every kata's pytest run.

- `plugin.py`: the pytest plugin (`--impl`, Hypothesis profiles, Triton's interpreter, figures,
  short "not implemented yet" failures), and `impl.py`, which finds and loads the implementation;
- the guards around every call into it: `guards.py` (the `Guard` and every check that fails a
  call), `snapshots.py` (what a call is given, recorded before and compared after),
  `integrity.py` (the judge's own modules, the test modules and PyTorch's settings, which no
  call may change);
- the counters the guards read: `observe.py` (`observing`: the always-on dispatch mode, its
  table of operators, PyTorch's mode switches refused, Triton's launches), `records.py` (what
  they record), `operators.py` (FLOP formulas), `refusals.py` (work off the books, threads and
  processes); each kata's rules (`rules.py`) and cost helpers (`cost.py`), the model log's audit
  (`audit.py`), the source check (`source_check.py`);
- how outputs are judged: `tolerance.py`, `oracles.py`, `strategies.py`, the attention kit
  (`attention.py`), the error contract (`errors.py`);
- per-test limits (`limits.py`), figures (`figures.py`), the rehearsal of the GPU tests on the
  CPU (`rehearsal.py`: the `gpu` fixture's `GpuRun`).

It imports from `grading.model` and `grading.devices` only; the tools that grade, teach or run
GPU checks sit above it. Nothing is imported here: the plugin must switch Triton's interpreter
on before anything imports Triton.
"""
