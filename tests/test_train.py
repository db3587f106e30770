"""The training script for the shipped byte-level models runs, and writes loadable checkpoints."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("safetensors", reason="needs the `models` extra")

from grading.model import from_pretrained, make_model  # noqa: E402
from grading.model.hf import save_checkpoint  # noqa: E402
from grading.model.train import decode, encode, main, sha256  # noqa: E402


@pytest.mark.parametrize("n_experts", [0, 4])
def test_a_checkpoint_written_loads_back_to_the_same_model(tmp_path, n_experts):
    model = make_model(3, torch.float32, norm_eps=1e-5, rope_base=500.0, n_experts=n_experts)
    save_checkpoint(model, tmp_path)
    loaded = from_pretrained(tmp_path)
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(0))
    assert loaded.config == model.config
    assert torch.equal(loaded(ids), model(ids))


def test_bytes_are_the_tokens():
    text = "def f(x):\n    return 'é'\n"
    assert decode(encode(text)) == text and int(encode(text).max()) < 256


def test_the_training_script_runs_a_few_steps(tmp_path):
    main(["--steps", "2", "--out", str(tmp_path), "--measure", "512", "--samples", "8"])
    for name in ("target", "draft"):
        record = json.loads((tmp_path / name / "training.json").read_text())
        assert record["steps"] == 2 and record["sha256"] == sha256(
            tmp_path / name / "model.safetensors"
        )
        assert from_pretrained(tmp_path / name).config.vocab_size == 256
    measured = json.loads((tmp_path / "agreement.json").read_text())
    assert 0.0 <= measured["greedy_agreement"] <= 1.0 and measured["samples"] == 8
    for name in ("draft", "lookup"):
        assert 0.0 <= measured[name]["acceptance"] <= 1.0
        assert 1.0 <= measured[name]["bytes_per_target_call"] <= 1 + measured["k"]
    assert (tmp_path / "loss.png").stat().st_size > 0


def test_speculation_counts_what_the_target_accepts():
    """A draft that is the target itself has every proposal accepted: k + 1 bytes per call;
    prompt lookup proposes what followed the tail's last occurrence."""
    from grading.model.train import CONTEXT, TARGET, initialised, lookup, speculation

    assert lookup(encode("abcXabcY abc"), 2).tolist() == list(b"Y ")
    assert lookup(encode("xyz"), 4).numel() == 0
    model = initialised(TARGET, 0).eval()
    text = encode("def f(x):\n    return x\n" * 12)[: CONTEXT + 40]
    same = speculation(model, model, text, samples=6)["draft"]
    assert same == {"acceptance": 1.0, "proposed_at": 1.0, "bytes_per_target_call": 5.0}


def test_the_shipped_models_are_the_recorded_ones_and_agree_as_recorded():
    """The checkpoints in grading/model/checkpoints are the ones their training.json describes
    (sha256), and measuring them again on held-out source gives agreement.json's figures."""
    from grading.model.train import SHIPPED, encode, measure, stdlib_source

    for name in ("target", "draft"):
        record = json.loads((SHIPPED / name / "training.json").read_text())
        assert sha256(SHIPPED / name / "model.safetensors") == record["sha256"], name
    recorded = json.loads((SHIPPED / "agreement.json").read_text())
    assert recorded["greedy_agreement"] >= 0.6  # the draft is worth speculating with
    held = encode(stdlib_source(True))[: recorded["held_out_bytes"]]
    target, draft = (from_pretrained(SHIPPED / name).eval() for name in ("target", "draft"))
    again = measure(target, draft, held, recorded["samples"])
    assert abs(again["greedy_agreement"] - recorded["greedy_agreement"]) <= 0.01, again
    for name in ("draft", "lookup"):
        for key, value in recorded[name].items():
            assert abs(again[name][key] - value) <= 0.02, (name, key, again[name], value)
