"""GPU target for `speculative_decoding`: the speed-up over plain cached greedy decoding.

Skipped without CUDA; on a GPU machine `python3 -m grading.gpu_check` runs it with the reference
(`--impl` picks another file).

The target is the shared model made large: 12 layers of width 2048 and a vocabulary of 32,000,
about 0.67 B parameters in bfloat16, so that a decoding step at batch 1 costs a full read of the
weights (plus launching every layer's kernels) whether it feeds one token or five. Its greedy
choices are replaced by a script (`ScriptedModel` with the large model inside: every call still
runs the whole model on its cache), and the draft is a `ScriptedModel` of negligible cost that
proposes the script's next token with probability alpha and a wrong one otherwise. So the draft
agrees with the target exactly as often as the test says, and the speed-up measures what
speculative decoding buys for a draft of that quality.

Both runs are timed in this process with `grading.attention.bench` (median of several runs):
plain decoding is the KV-cache kata's reference `generate`, one call per token. Target: at least
2x at alpha = 0.8, k = 4, where (1 - 0.8^5) / (1 - 0.8) = 3.36 tokens come from each target call.
"""

from __future__ import annotations

import pytest
import torch

from grading.attention import bench
from katas.speculative_decoding.cases import ScriptedModel, coin_flips

pytestmark = pytest.mark.gpu

LARGE = dict(
    n_layers=12, n_heads=16, n_kv_heads=4, head_dim=128, hidden_dim=5632, vocab_size=32000,
    max_seq_len=512,
)  # fmt: skip
T, N = 32, 128  # prompt and new tokens
ALPHAS, KS = [0.6, 0.8, 0.9], [2, 4, 8]
TARGET_SPEEDUP = 2.0  # at alpha = 0.8, k = 4
REP_MS = 2000  # each timing takes the median of about 2 s of whole decodings


@pytest.fixture(scope="module")
def large_target():
    from grading.model import make_model

    model = make_model(0, torch.bfloat16, **LARGE).cuda()
    V = LARGE["vocab_size"]
    gen = torch.Generator().manual_seed(0)
    script = torch.randint(0, V, (T + N,), generator=gen).tolist()
    return ScriptedModel(script, V, inner=model), script


def test_speculative_decoding_speedup(impl, figures, large_target):
    from reference.kv_cache import generate  # plain cached greedy decoding, the baseline

    target, script = large_target
    V = LARGE["vocab_size"]
    prompt = torch.tensor([script[:T]], device="cuda")
    assert generate(target, prompt, N)[0].tolist() == script
    plain_ms = bench(lambda: generate(target, prompt, N), warmup=1, rep=REP_MS)
    params = sum(p.numel() for p in target.inner.parameters())
    figures.record("plain decoding", N / (plain_ms * 1e-3), "tokens/s", params=params)
    failures = []
    for alpha in ALPHAS:
        for k in KS:
            draft = ScriptedModel(
                script, V, wrong=coin_flips(alpha, seed=k), dtype=torch.bfloat16, device="cuda"
            )
            out, stats = impl.speculative_decode(target, draft, prompt, N, k=k)
            assert out[0].tolist() == script, "the output must be the target's greedy decoding"
            run = lambda draft=draft, k=k: impl.speculative_decode(target, draft, prompt, N, k=k)
            spec_ms = bench(run, warmup=1, rep=REP_MS)
            speedup = plain_ms / spec_ms
            per_call = round(N / stats.target_calls, 2)
            context = dict(alpha=alpha, k=k, tokens_per_target_call=per_call)
            figures.record("speculative / plain decoding speed", speedup, "x", **context)
            if (alpha, k) == (0.8, 4) and speedup < TARGET_SPEEDUP:
                failures.append(
                    f"alpha 0.8, k 4: {speedup:.2f}x (plain {plain_ms:.0f} ms, speculative "
                    f"{spec_ms:.0f} ms for {N} tokens; {stats})"
                )
    assert not failures, (
        f"speculative decoding should be at least {TARGET_SPEEDUP}x faster than plain decoding "
        f"at alpha = 0.8, k = 4: {failures[0]}. Usually: a sync per proposal (.item() or "
        "int() on the GPU inside the draft loop), the prefix re-fed, or caches rebuilt per round"
    )
