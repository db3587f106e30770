"""The benchmarks run end to end on tiny settings, and every method's tokens are greedy decoding's.

The trained pair is stood in for by random weights in the trained models' shapes
(`grading.model.train` TARGET and DRAFT), written as checkpoints the way
`python -m grading.model.train` writes them; the serving benchmark's mixture and workload are
shrunk so that each test takes seconds.
"""

from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

pytest.importorskip("transformers", reason="needs the `models` extra")
pytest.importorskip("safetensors", reason="needs the `models` extra")

from grading.judge.impl import load_impl  # noqa: E402
from grading.model import (  # noqa: E402
    greedy_generate_no_cache,
    latency,
    make_model,
)
from grading.model.hf import save_checkpoint  # noqa: E402
from grading.model.naive import Completion  # noqa: E402
from grading.model.train import DRAFT, TARGET  # noqa: E402
from grading.model.workload import held_out_prompts  # noqa: E402
from katas.serving import benchmark as serving  # noqa: E402
from katas.speculative_decoding import benchmark as speculative  # noqa: E402


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A folder with target/ and draft/ checkpoints: random weights, the trained models' shapes."""
    folder = tmp_path_factory.mktemp("models")
    for seed, (name, config) in enumerate((("target", TARGET), ("draft", DRAFT))):
        model = make_model(seed, torch.float32, **dataclasses.asdict(config))
        save_checkpoint(model, folder / name)
    return folder


@pytest.fixture(autouse=True)
def threads():
    """The benchmarks run on one thread; the tests after them get their threads back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def greedy(model, prompt: list[int], n: int) -> list[int]:
    """The oracle: greedy decoding without a cache, every step re-feeding the sequence."""
    out = greedy_generate_no_cache(model, torch.tensor([prompt]), n)
    return out[0, len(prompt) :].tolist()


def test_speculative_benchmark_gives_greedy_decodings_bytes(pair, tmp_path):
    impl = load_impl("speculative_decoding", "reference")
    target, draft = speculative.load_pair(pair, torch.float32)
    prompts = [torch.tensor([p]) for p in held_out_prompts([10, 10, 10])]
    results = speculative.run_all(impl, target, draft, prompts, new=14, k=3, repeats=1)
    expected = [greedy(target, p[0].tolist(), 14) for p in prompts]
    for r in results:
        assert r.tokens == expected, f"{r.name}: its bytes differ from greedy decoding's"
        assert sum(r.per_call) == 14, f"{r.name}: {r.per_call} should commit 14 bytes"
    assert [r.target_calls for r in results][0] == 3 * 14, "plain greedy: a call per token"
    argv = ["--models", str(pair), "--prompts", "2", "--prompt-bytes", "8", "--new-bytes", "6"]
    assert speculative.main([*argv, "--repeats", "1", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "speculative_cpu.md").read_text()
    assert text.count("| 2/2 |") == 3, text


def test_speculative_benchmark_refuses_a_folder_without_models(tmp_path):
    with pytest.raises(SystemExit, match="python -m grading.model.train"):
        speculative.main(["--models", str(tmp_path), "--out", str(tmp_path)])


@pytest.fixture
def tiny_serving(monkeypatch):
    """The serving benchmark's mixture and workloads shrunk so that a run takes seconds."""
    monkeypatch.setattr(serving, "CPU_MODEL", {**serving.CPU_MODEL, "hidden_dim": 32})
    monkeypatch.setattr(serving, "CPU_WORKLOAD", {**serving.CPU_WORKLOAD, "scale": 0.03})


def test_serving_benchmark_gives_greedy_decodings_tokens(pair, tmp_path, tiny_serving):
    impl = load_impl("serving", "reference")
    results, mixture, shared, long, trained = serving.measure(
        impl, 6, repeats=1, device="cpu", folder=pair
    )
    sections = {r.variant.section for r in results}
    assert sections == {
        "ladder", "switched off", "transformers", "shared prefix", "long prompts", "trained pair"
    }  # fmt: skip
    assert sum(len(r.prompt) == serving.LONG_PROMPT for r in long.requests) == 1
    served = {"trained pair": trained, "shared prefix": shared, "long prompts": long}
    for r in results:
        s = served.get(r.variant.section, mixture)
        expected = [
            greedy(s.model, q.prompt, q.max_new_tokens) for q in s.requests[: len(r.tokens)]
        ]
        assert r.tokens == expected, f"{r.variant.name}: its tokens differ from greedy decoding's"
        assert (r.latency is None) == (r.variant.section == "transformers"), r.variant.name
    naive = next(r for r in results if r.variant == serving.NAIVE)
    assert naive.latency.tpot == (1.0, 1.0), "naive_serve makes one token per step"
    assert naive.latency.ttft[0] >= 1 and naive.latency.step_s > 0
    text = serving.report(results, mixture, shared, long, trained, pair, "python -m ...", "cpu")
    for variant in serving.VARIANTS + serving.PAIR + serving.SHARED[-1:] + serving.LONG:
        assert f"| {variant.name} |" in text, f"{variant.name} is missing from the report"
    assert text.count("| TTFT p50, steps |") == 4, "a latency table per workload"
    assert "shared_prefix_workload(6, seed=0, n_prefixes=4, prefix_len=64" in text
    assert "- Chunked prefill: TPOT p99" in text
    by = {(r.variant.section, r.variant.name): r for r in results}
    plain = by["shared prefix", serving.NO_DRAFT.name]  # batched serve, every request
    cached = by["shared prefix", serving.SHARED[-1].name]
    assert len(plain.tokens) == len(cached.tokens) == len(shared.requests)
    reads = (serving.prompt_reads(plain), serving.prompt_reads(cached))
    assert f"target read {reads[0]:,} prompt tokens without it and {reads[1]:,} with it" in text
    serving.plot(results, tmp_path / "serving_cpu.png", "cpu")
    assert (tmp_path / "serving_cpu.png").stat().st_size > 0


def test_serving_benchmark_says_what_it_skips_without_transformers_and_matplotlib(
    pair, tmp_path, tiny_serving, monkeypatch, capsys
):
    """Without the optional packages the benchmark still runs: a line for each thing skipped
    (the transformers rows, the picture) instead of a ModuleNotFoundError, the tables first."""
    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["--models", str(pair), "--requests", "4", "--repeats", "1", "--out", str(tmp_path)]
    assert serving.main(argv) == 0
    out = capsys.readouterr().out
    text = (tmp_path / "serving_cpu.md").read_text()
    assert serving.NO_TRANSFORMERS in text and serving.NO_TRANSFORMERS in out
    assert "transformers not installed" in text
    assert not any(f"| {v.name} |" in text for v in serving.TRANSFORMERS), text
    assert "| + grouped MoE: serve |" in text, "the engine's rows are still measured"
    assert out.index("| naive_serve |") < out.index(serving.NO_MATPLOTLIB), "tables first"
    assert not (tmp_path / "serving_cpu.png").exists()


def test_latency_counts_the_step_that_made_the_first_token():
    """TTFT = first_token - arrival + 1 steps; TPOT = (finished - first_token) / (n - 1)."""
    done = [
        Completion(0, [1, 2, 3, 4, 5], arrival=2, first_token=2, finished=6),  # served at once
        Completion(1, [7], arrival=0, first_token=9, finished=9),  # one token: no TPOT
        Completion(2, [1, 2, 3], arrival=1, first_token=4, finished=5),  # speculation: 2 in 1
    ]
    assert [latency.ttft_steps(c) for c in done] == [1, 10, 4]
    assert [latency.tpot_steps(c) for c in done] == [1.0, None, 0.5]
    got = latency.latency(done, step_s=0.01)
    assert got.ttft == (4, pytest.approx(9.88)) and got.tpot == (0.75, pytest.approx(0.995))
    assert got.ttft_s[0] == pytest.approx(0.04), "without call times: steps x step_s"
    assert latency.percentile([3, 1, 2], 50) == 2 and latency.percentile([5], 99) == 5


def test_latency_in_seconds_runs_on_each_steps_own_time():
    """Given each target call's time, a step lasts as long as its call: a long step (a prompt
    prefilled whole) delays every request in it; idle steps take no time."""
    done = [
        Completion(0, [1, 2, 3], arrival=0, first_token=0, finished=2),
        Completion(1, [4], arrival=1, first_token=3, finished=3),
        Completion(2, [5, 6], arrival=6, first_token=6, finished=7),  # steps 4 and 5 idle
    ]
    got = latency.latency(done, step_s=99.0, call_seconds=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    # steps 0, 1, 2, 3, 6, 7 end at 1, 3, 6, 10, 15, 21 seconds
    assert latency.step_ends(done, [1.0] * 6) == {0: 1, 1: 2, 2: 3, 3: 4, 6: 5, 7: 6}
    assert got.ttft_s == (5.0, pytest.approx(8.92))  # of 1 - 0, 10 - 1, 15 - 10
    assert got.tpot_s == (pytest.approx(4.25), pytest.approx(5.965))  # of (6 - 1) / 2, 21 - 15
    fallback = latency.latency(done, step_s=0.5, call_seconds=[1.0, 2.0])  # not one per step
    assert fallback.ttft_s == tuple(0.5 * t for t in fallback.ttft)


def test_reports_name_the_repositorys_files_relative_to_it(tmp_path):
    """A recorded report is read on other machines: the shipped models' folder is named as the
    repository names it, not by the absolute path of the machine that ran the benchmark."""
    from grading.judge.impl import REPO_ROOT, repo_relative
    from grading.model.train import SHIPPED

    assert repo_relative(SHIPPED) == "grading/model/checkpoints"
    assert repo_relative(tmp_path) == str(tmp_path)  # outside the repository: as given
    for name in ("serving_cpu.md", "speculative_cpu.md"):
        text = (REPO_ROOT / "results" / name).read_text()
        assert "Models (`grading/model/checkpoints`)" in text, f"results/{name}: {text[:200]}"
