"""GPU target for `speculative_decoding`: the speed-up over plain cached greedy decoding.

Skipped without CUDA; on a GPU machine `python3 -m grading.gpu.check` runs it with the reference
(`--impl` picks another file); `pytest katas/speculative_decoding -m gpu --rehearse` runs it on
the CPU, small, without judging speed.

The target is the shared model made large: 12 layers of width 2048 and a vocabulary of 32,000,
about 0.67 B parameters in bfloat16, so that a decoding step at batch 1 costs a full read of the
weights (plus launching every layer's kernels) whether it feeds one token or five. Its greedy
choices are replaced by a script (`ScriptedModel` with the large model inside: every call still
runs the whole model on its cache), and the draft is a `ScriptedModel` of negligible cost that
proposes the script's next token with probability alpha and a wrong one otherwise. So the draft
agrees with the target exactly as often as the test says, and the speed-up measures what
speculative decoding buys for a draft of that quality.

Both runs are timed in this process with `grading.devices.bench` (median of several runs):
plain decoding is the KV-cache kata's reference `generate`, one call per token. Target: at least
2x at alpha = 0.8, k = 4, where (1 - 0.8^5) / (1 - 0.8) = 3.36 tokens come from each target call.
"""

from __future__ import annotations

import pytest
import torch

from katas.speculative_decoding.cases import ScriptedModel, coin_flips

pytestmark = pytest.mark.gpu

LARGE = dict(
    n_layers=12, n_heads=16, n_kv_heads=4, head_dim=128, hidden_dim=5632, vocab_size=32000,
    max_seq_len=512,
)  # fmt: skip
REHEARSED = dict(
    n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, hidden_dim=64, vocab_size=256,
    max_seq_len=64,
)  # fmt: skip
T, N = 32, 128  # prompt and new tokens (8 and 24 in a rehearsal)
ALPHAS, KS = [0.6, 0.8, 0.9], [2, 4, 8]
TARGET_SPEEDUP = 2.0  # at alpha = 0.8, k = 4
REP_MS = 2000  # each timing takes the median of about 2 s of whole decodings


@pytest.mark.headline
def test_speculative_decoding_speedup(impl, figures, gpu):
    from grading.model import make_model
    from reference.kv_cache import generate  # plain cached greedy decoding, the baseline

    config = {key: gpu.size(value, REHEARSED[key]) for key, value in LARGE.items()}
    model = make_model(0, gpu.dtype(torch.bfloat16), **config).to(gpu.device)
    V, T_, N_ = config["vocab_size"], gpu.count(T, 8), gpu.count(N, 24)
    script = torch.randint(0, V, (T_ + N_,), generator=torch.Generator().manual_seed(0)).tolist()
    target = ScriptedModel(script, V, inner=model)
    prompt = torch.tensor([script[:T_]], device=gpu.device)
    assert generate(target, prompt, N_)[0].tolist() == script
    rep_ms = gpu.size(REP_MS, 1)
    plain_ms = gpu.bench(lambda: generate(target, prompt, N_), warmup=1, rep=rep_ms)
    params = sum(p.numel() for p in model.parameters())
    figures.record("plain decoding", N_ / (plain_ms * 1e-3), "tokens/s", params=params)
    failures = []
    for alpha in ALPHAS:
        for k in KS:
            draft = ScriptedModel(
                script, V, wrong=coin_flips(alpha, seed=k), dtype=model.embed.weight.dtype,
                device=gpu.device,
            )  # fmt: skip
            out, stats = impl.speculative_decode(target, draft, prompt, N_, k=k)
            assert out[0].tolist() == script, "the output must be the target's greedy decoding"
            run = lambda draft=draft, k=k: impl.speculative_decode(target, draft, prompt, N_, k=k)
            spec_ms = gpu.bench(run, warmup=1, rep=rep_ms)
            speedup = plain_ms / spec_ms
            per_call = round(N_ / stats.target_calls, 2)
            context = dict(alpha=alpha, k=k, tokens_per_target_call=per_call)
            figures.record("speculative / plain decoding speed", speedup, "x", **context)
            if (alpha, k) == (0.8, 4) and speedup < TARGET_SPEEDUP:
                failures.append(
                    f"alpha 0.8, k 4: {speedup:.2f}x (plain {plain_ms:.0f} ms, speculative "
                    f"{spec_ms:.0f} ms for {N_} tokens; {stats})"
                )
    figures.expect(
        not failures,
        f"speculative decoding should be at least {TARGET_SPEEDUP}x faster than plain decoding "
        f"at alpha = 0.8, k = 4: {failures[:1]}. Usually: a sync per proposal (.item() or "
        "int() on the GPU inside the draft loop), the prefix re-fed, or caches rebuilt per round",
    )
