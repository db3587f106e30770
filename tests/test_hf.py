"""Hugging Face checkpoints load into the shared model and compute what `transformers` computes.

Tiny random Llama and Mixtral models are made with `transformers` itself and saved into a
temporary folder, so nothing is downloaded. Their weights are redrawn at a useful scale (the
default 0.02 init makes every logit nearly zero, which any loader would match). `transformers`
runs its RMSNorm and RoPE tables in float32 even in a float64 model, so agreement is judged with
the float32 tolerance.
"""

from __future__ import annotations

import json

import pytest
import torch

from grading.judge.tolerance import assert_close
from grading.model import SequenceCache, from_pretrained

transformers = pytest.importorskip("transformers", reason="needs the `models` extra")
pytest.importorskip("safetensors", reason="needs the `models` extra")

F32 = torch.float32  # the tolerance every comparison uses
SIZES = dict(
    vocab_size=97,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


def save_tiny(folder, kind: str, **overrides):
    """A tiny random `transformers` model of `kind` ("llama" or "mixtral"), saved to folder."""
    if kind == "llama":
        config = transformers.LlamaConfig(**SIZES, rms_norm_eps=1e-5, **overrides)
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.MixtralConfig(
            **SIZES,
            num_local_experts=4,
            num_experts_per_tok=2,
            experts_implementation="eager",
            **overrides,
        )
        model = transformers.MixtralForCausalLM(config)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            fan_in = p.shape[-1] if p.dim() > 1 else 1
            noise = torch.randn(p.shape, generator=gen) / fan_in**0.5
            p.copy_(1 + 0.1 * noise if p.dim() == 1 else noise * (2.0 if p.dim() > 1 else 1))
    model.save_pretrained(folder)
    return model.double().eval()


def ids(B, T, seed=1):
    return torch.randint(
        0, SIZES["vocab_size"], (B, T), generator=torch.Generator().manual_seed(seed)
    )


@pytest.mark.parametrize("kind", ["llama", "mixtral"])
@pytest.mark.parametrize("tied", [False, True])
def test_logits_match_transformers(tmp_path, kind, tied):
    theirs = save_tiny(tmp_path, kind, tie_word_embeddings=tied)
    x = ids(2, 19)
    with torch.no_grad():
        expected = theirs(x).logits  # (B, T, vocab) float64
    ours = from_pretrained(tmp_path, dtype=torch.float64)
    assert ours.config.n_experts == (4 if kind == "mixtral" else 0)
    assert_close(ours(x), expected, dtype=F32, name=f"{kind} logits (float64)")
    assert_close(from_pretrained(tmp_path)(x).double(), expected, dtype=F32)


@pytest.mark.parametrize("kind", ["llama", "mixtral"])
def test_cache_ragged_batch_and_packed_pass_match_transformers(tmp_path, kind):
    theirs = save_tiny(tmp_path, kind)
    ours = from_pretrained(tmp_path, dtype=torch.float64)
    x = ids(1, 23, seed=2)
    with torch.no_grad():
        expected = theirs(x).logits[0]  # (T, vocab)

    cache = SequenceCache(ours.config)  # a prefill of 9, then one token at a time
    steps = [ours(x[:, :9], cache)] + [ours(x[:, t : t + 1], cache) for t in range(9, 23)]
    assert_close(torch.cat(steps, dim=1)[0], expected, dtype=F32, name="cached logits")

    caches = [SequenceCache(ours.config) for _ in range(2)]  # row 1 is ahead of row 0
    ours.forward_batch([x[0, :5]], caches[:1])
    rows = ours.forward_batch([x[0, 5:12], x[0, :3]], caches)
    assert_close(rows[0], expected[5:12], dtype=F32, name="ragged batch, row 0")
    assert_close(rows[1], expected[:3], dtype=F32, name="ragged batch, row 1")

    def plain(layer, q, k, v):  # one row from position 0: causal attention over itself
        from grading.model import causal_attention

        q, k, v = (t.transpose(0, 1)[None] for t in (q, k, v))  # (1, H, N, hd)
        return causal_attention(q, k, v)[0][0].transpose(0, 1)

    packed = ours.forward_packed([x[0]], [0], plain)[0]
    assert_close(packed, expected, dtype=F32, name="forward_packed")


def test_settings_the_model_cannot_run_are_refused_by_name(tmp_path):
    save_tiny(tmp_path, "llama", attention_bias=True)
    with pytest.raises(ValueError, match="attention_bias"):
        from_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(attention_bias=False, rope_scaling={"rope_type": "linear", "factor": 2.0})
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="rope_scaling"):
        from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="path"):
        from_pretrained(tmp_path / "missing")


def test_tokenizer_loads_from_the_folder(tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="needs the `models` extra")
    from grading.model.hf import load_tokenizer

    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="?"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, special_tokens=["?"])
    tok.train_from_iterator(["def f(x):\n    return x + 1\n"] * 20, trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    loaded = load_tokenizer(tmp_path)
    text = "def f(x):"
    assert loaded.decode(loaded.encode(text).ids).strip() == text


def test_mixtral_with_fused_experts_loads_the_same(tmp_path):
    """transformers 5 keeps experts fused in memory (gate_up_proj, down_proj); a checkpoint
    saved from that layout loads into the same model as the per-expert layout."""
    from safetensors.torch import save_file

    theirs = save_tiny(tmp_path, "mixtral")
    fused = tmp_path / "fused"
    fused.mkdir()
    (fused / "config.json").write_text((tmp_path / "config.json").read_text())
    state = {k: v.float().contiguous() for k, v in theirs.state_dict().items()}
    assert any(k.endswith("experts.gate_up_proj") for k in state)
    save_file(state, str(fused / "model.safetensors"))
    x = ids(1, 11)
    assert torch.equal(from_pretrained(fused)(x), from_pretrained(tmp_path)(x))
