"""The prepared GPU check: every GPU test and benchmark of the repository, in one command.

    python3 -m grading.gpu_check                 # figures in gpu-results/
    python3 -m grading.gpu_check --record        # ... and appended to results/gpu.md

Runs with the machine's own python3 and installs nothing (PyTorch >= 2.4, Triton >= 3.0, pytest
and Hypothesis must be there). It runs `pytest -m gpu` over every kata with `--impl reference`,
writes the recorded figures as JSON and as a Markdown table, and exits with pytest's status.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

from grading.figures import markdown_table
from grading.impl import REPO_ROOT


def machine_summary() -> str:
    import torch

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA GPU"
    python = sys.version.split()[0]
    return f"{gpu}; torch {torch.__version__}; triton {triton_version}; python {python}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default="gpu-results", help="folder for figures.json and figures.md"
    )
    parser.add_argument("--impl", default="reference", help="implementation to benchmark")
    parser.add_argument("--record", action="store_true", help="append the table to results/gpu.md")
    parser.add_argument("pytest_args", nargs="*", help="extra arguments for pytest")
    args = parser.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = machine_summary()
    print(f"GPU check on {summary}", flush=True)
    command = [
        sys.executable, "-m", "pytest", "katas", "-m", "gpu", "-v", "-p", "no:cacheprovider",
        f"--impl={args.impl}", f"--figures={out / 'figures.json'}",
        # A GPU machine's PyTorch and Triton may be older or newer than the CPU environment's:
        # their deprecation notices are shown, not turned into failures that waste the run.
        "-W", "default::DeprecationWarning", "-W", "default::FutureWarning",
        *args.pytest_args,
    ]  # fmt: skip
    status = subprocess.call(command, cwd=REPO_ROOT)

    figures_file = out / "figures.json"
    figures = json.loads(figures_file.read_text()) if figures_file.exists() else []
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    table = f"## {stamp}: {summary}\n\npytest exit status {status}\n\n" + markdown_table(figures)
    (out / "figures.md").write_text(table)
    print(table)
    if args.record:
        results = REPO_ROOT / "results" / "gpu.md"
        with results.open("a") as f:
            f.write("\n" + table)
        print(f"appended to {results}")
    return status


if __name__ == "__main__":
    sys.exit(main())
