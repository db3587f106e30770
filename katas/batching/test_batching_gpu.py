"""GPU benchmark: real tokens per second of the three strategies, as ratios to static batching.

Skipped without CUDA; on a GPU machine `python3 -m grading.gpu.check` runs it with the reference
(`pytest katas/batching -m gpu --rehearse` runs it on the CPU, small, without judging speed).
The model is the shared Llama-style decoder made large enough that its matrix products matter
(4 layers, 2048 wide, 32000-token vocabulary, bfloat16); the workload is the shipped chat-like
one at half the ShareGPT lengths. Each strategy serves the whole workload, timed with
`grading.devices.bench` (median of repeated runs after a warm-up) in one session, and only
ratios are judged: continuous batching must reach at least 2x static batching's tokens/s.
"""

from __future__ import annotations

import pytest
import torch

from grading.model import make_model
from grading.model.workload import poisson_workload

pytestmark = pytest.mark.gpu

BATCH = 16
TARGET = 2.0
CONFIG = dict(n_layers=4, n_heads=16, n_kv_heads=4, head_dim=128, hidden_dim=8192,
              vocab_size=32000, max_seq_len=1024)  # fmt: skip
REHEARSED = dict(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, hidden_dim=128,
                 vocab_size=256, max_seq_len=256)  # fmt: skip


@pytest.mark.headline
def test_continuous_batching_tokens_per_second_on_the_gpu(impl, figures, gpu):
    config = {k: gpu.size(v, REHEARSED[k]) for k, v in CONFIG.items()}
    model = make_model(0, gpu.dtype(torch.bfloat16), **config).to(gpu.device)
    specs = poisson_workload(
        gpu.count(64, 8), rate=2.0, seed=0, vocab_size=config["vocab_size"],
        max_seq_len=config["max_seq_len"], scale=gpu.size(0.5, 0.05),
    )  # fmt: skip
    requests = [impl.Request(s.id, s.prompt, s.max_new_tokens, s.arrival) for s in specs]
    generated = sum(s.max_new_tokens for s in specs)
    runs = {
        "static": lambda: impl.static_batching(model, requests, BATCH),
        "dynamic": lambda: impl.dynamic_batching(model, requests, BATCH, 4),
        "continuous": lambda: impl.continuous_batching(model, requests, BATCH),
    }
    rate = {}
    for name, run in runs.items():
        ms = gpu.bench(lambda run=run: (model.batch_log.clear(), run()), warmup=1, rep=1)
        rate[name] = generated / (ms / 1e3)
        figures.record(f"{name}: tokens/s", rate[name], "tokens/s", batch_size=BATCH)
    for name in ("dynamic", "continuous"):
        figures.record(f"{name} / static tokens/s", rate[name] / rate["static"], "x")
    ratio = rate["continuous"] / rate["static"]
    figures.expect(
        ratio >= TARGET,
        f"continuous batching served {rate['continuous']:.0f} tokens/s, static "
        f"{rate['static']:.0f}: {ratio:.2f}x, below the {TARGET}x target",
    )
