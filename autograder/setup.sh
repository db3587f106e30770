#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image. The autograder's zip holds
# this repository with setup.sh, run_autograder and assignment.toml at its root (grading/README.md
# says how to make it); Gradescope unpacks it into /autograder/source.
set -euo pipefail
apt-get update
apt-get install -y python3 python3-venv python3-pip
cd /autograder/source
python3 -m venv /autograder/venv
# A CPU build of PyTorch: a plain `torch` would pull several GB of CUDA libraries.
/autograder/venv/bin/pip install "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install "triton==3.9.0" -e ".[test,tools]"
