"""Hugging Face checkpoints in the shared model: Llama-architecture models (SmolLM2, TinyLlama,
Llama 2, Mistral without a sliding window) into `TinyLlama`, Mixtral-style mixtures into its
mixture-of-experts variant.

    from grading.model import from_pretrained
    model = from_pretrained("models/SmolLM2-135M", dtype=torch.bfloat16, device="cuda")
    tokenizer = load_tokenizer("models/SmolLM2-135M")   # the `tokenizers` package

The loader reads a local folder: `config.json` and the weights as safetensors (one file, or
shards listed in `model.safetensors.index.json`). Downloading is yours to do, e.g. with
`hf download HuggingFaceTB/SmolLM2-135M --local-dir models/SmolLM2-135M`. It needs the
`safetensors` package (`pip install -e .[models]`); `tokenizers` only for `load_tokenizer`.

What maps onto what (the shared model's contract is unchanged: RMSNorm, RoPE in the half-split
layout Hugging Face's Llama also uses, grouped-query attention, SwiGLU, untied output head):

    model.embed_tokens                     -> embed
    layers.i.input_layernorm               -> blocks[i].attn_norm
    layers.i.self_attn.{q,k,v,o}_proj      -> blocks[i].attn.{wq,wk,wv,wo}
    layers.i.post_attention_layernorm      -> blocks[i].mlp_norm
    layers.i.mlp.{gate,up,down}_proj       -> blocks[i].mlp.{w1,w3,w2}
    layers.i.block_sparse_moe.gate         -> blocks[i].mlp.gate          (Mixtral)
    layers.i.block_sparse_moe.experts.e.wN -> blocks[i].mlp.experts[e].wN (Mixtral)
    norm, lm_head (or embed_tokens, tied)  -> norm, lm_head

Anything the shared model cannot compute exactly (biases, RoPE scaling, a sliding window,
another activation) is refused with a ValueError that names the setting, never approximated.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from grading.model.layers import ModelConfig
from grading.model.llama import TinyLlama

ARCHITECTURES = ("llama", "mistral", "mixtral")


def config_from_hf(hf: dict, max_seq_len: int | None = None) -> ModelConfig:
    """The shared model's config for a Hugging Face `config.json` (as a dict)."""
    kind = hf.get("model_type")
    if kind not in ARCHITECTURES:
        raise ValueError(f"model_type: expected one of {ARCHITECTURES}, got {kind!r}")
    n_heads, dim = hf["num_attention_heads"], hf["hidden_size"]
    head_dim = hf.get("head_dim") or dim // n_heads
    rope = hf.get("rope_parameters") or {}  # transformers 5; older configs say rope_theta
    refusals = {
        "hidden_act": hf.get("hidden_act", "silu") != "silu",
        "attention_bias": bool(hf.get("attention_bias")),
        "mlp_bias": bool(hf.get("mlp_bias")),
        "rope_scaling": bool(hf.get("rope_scaling"))
        or rope.get("rope_type", "default") != "default",
        "sliding_window": bool(hf.get("sliding_window"))
        and hf["sliding_window"] < (max_seq_len or hf["max_position_embeddings"]),
        "head_dim": head_dim * n_heads != dim,
    }
    for name, refused in refusals.items():
        if refused:
            raise ValueError(f"{name}: the shared model cannot run {name}={hf.get(name)!r}")
    experts = hf.get("num_local_experts", 0) if kind == "mixtral" else 0
    return ModelConfig(
        n_layers=hf["num_hidden_layers"],
        n_heads=n_heads,
        n_kv_heads=hf.get("num_key_value_heads") or n_heads,
        head_dim=head_dim,
        vocab_size=hf["vocab_size"],
        max_seq_len=max_seq_len or hf["max_position_embeddings"],
        hidden_dim=hf["intermediate_size"],
        n_experts=experts,
        top_k=hf.get("num_experts_per_tok", 2) if experts else 2,
        rope_base=float(rope.get("rope_theta", hf.get("rope_theta", 10000.0))),
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
    )


def read_safetensors(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint in `folder`, by its Hugging Face name."""
    from safetensors.torch import load_file

    index = folder / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = [p.name for p in sorted(folder.glob("*.safetensors"))]
    if not files:
        raise ValueError(f"path: no *.safetensors weights in {folder}")
    tensors: dict[str, torch.Tensor] = {}
    for name in files:
        tensors.update(load_file(folder / name))
    return tensors


def shared_names(hf: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under the shared model's parameter names."""
    out = {ours: hf[theirs] for theirs, ours in hf_names(config).items() if theirs in hf}
    if "lm_head.weight" not in hf:  # tied to the embedding
        out["lm_head.weight"] = hf["model.embed_tokens.weight"]
    for i in range(config.n_layers if config.n_experts else 0):
        src, dst = f"model.layers.{i}.mlp.", f"blocks.{i}.mlp."
        if src + "experts.gate_up_proj" not in hf:
            continue
        # The layout transformers 5 keeps in memory: gate (E, dim), gate_up_proj (E, 2 * hidden,
        # dim) with gate rows first, down_proj (E, dim, hidden).
        out[dst + "gate.weight"] = hf[src + "gate.weight"]
        for e in range(config.n_experts):
            w1, w3 = hf[src + "experts.gate_up_proj"][e].chunk(2)
            out[f"{dst}experts.{e}.w1.weight"], out[f"{dst}experts.{e}.w3.weight"] = w1, w3
            out[f"{dst}experts.{e}.w2.weight"] = hf[src + "experts.down_proj"][e]
    return out


def load_checkpoint(
    path: str | Path,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str = "cpu",
    max_seq_len: int | None = None,
) -> TinyLlama:
    """A Hugging Face checkpoint folder as the shared model, in `dtype` on `device`, in eval
    mode. `max_seq_len` caps the positions (and RoPE tables) below the checkpoint's own."""
    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise ValueError(
            f"path: expected a local checkpoint folder with config.json, got {str(path)!r} "
            "(download it first, e.g. `hf download ID --local-dir DIR`)"
        )
    config = config_from_hf(json.loads((folder / "config.json").read_text()), max_seq_len)
    model = TinyLlama(config)
    weights = shared_names(read_safetensors(folder), config)
    expected = dict(model.named_parameters())
    missing = sorted(set(expected) - set(weights))
    if missing:
        raise ValueError(f"path: the checkpoint has no tensor for {missing[:3]}")
    with torch.no_grad():
        for name, p in expected.items():
            if tuple(weights[name].shape) != tuple(p.shape):
                raise ValueError(
                    f"path: {name} has shape {tuple(weights[name].shape)}, "
                    f"config.json implies {tuple(p.shape)}"
                )
            p.copy_(weights[name].to(torch.float64))
    return model.to(device=device, dtype=dtype).eval()


def from_pretrained(
    path: str, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu", **options
) -> TinyLlama:
    """A Hugging Face Llama or Mixtral checkpoint (a local folder) as the shared model (see the
    module's docstring for what maps onto what and what is refused). It needs the optional extra
    `models` (safetensors)."""
    return load_checkpoint(path, dtype=dtype, device=device, **options)


def load_tokenizer(path: str | Path):
    """The checkpoint's tokenizer (`tokenizers.Tokenizer` from its tokenizer.json)."""
    from tokenizers import Tokenizer

    file = Path(path).expanduser() / "tokenizer.json"
    if not file.is_file():
        raise ValueError(f"path: expected {file} (a fast tokenizer's tokenizer.json)")
    return Tokenizer.from_file(str(file))


def save_checkpoint(model: TinyLlama, folder: str | Path) -> None:
    """Write the shared model as a Hugging Face checkpoint folder (config.json and
    model.safetensors, float32): a Llama, or a Mixtral for the mixture. The inverse of
    `load_checkpoint`, so `transformers` can run the very same weights."""
    from safetensors.torch import save_file

    c = model.config
    config = {
        "architectures": ["MixtralForCausalLM" if c.n_experts else "LlamaForCausalLM"],
        "model_type": "mixtral" if c.n_experts else "llama",
        "hidden_act": "silu",
        "hidden_size": c.dim,
        "intermediate_size": c.hidden_dim,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.n_kv_heads,
        "head_dim": c.head_dim,
        "vocab_size": c.vocab_size,
        "max_position_embeddings": c.max_seq_len,
        "rms_norm_eps": c.norm_eps,
        "rope_theta": c.rope_base,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    if c.n_experts:
        config.update(num_local_experts=c.n_experts, num_experts_per_tok=c.top_k)
    names = {ours: theirs for theirs, ours in hf_names(c).items()}
    tensors = {
        names[name]: p.detach().float().cpu().contiguous() for name, p in model.named_parameters()
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file(tensors, str(folder / "model.safetensors"))


def hf_names(config: ModelConfig) -> dict[str, str]:
    """Hugging Face name -> shared name, every parameter (per-expert names for a mixture)."""
    names = {
        "model.embed_tokens.weight": "embed.weight",
        "model.norm.weight": "norm",
        "lm_head.weight": "lm_head.weight",
    }
    for i in range(config.n_layers):
        src, dst = f"model.layers.{i}.", f"blocks.{i}."
        names[src + "input_layernorm.weight"] = dst + "attn_norm"
        names[src + "post_attention_layernorm.weight"] = dst + "mlp_norm"
        for a, b in zip("qkvo", ("wq", "wk", "wv", "wo"), strict=True):
            names[f"{src}self_attn.{a}_proj.weight"] = f"{dst}attn.{b}.weight"
        if not config.n_experts:
            for a, b in (("gate", "w1"), ("up", "w3"), ("down", "w2")):
                names[f"{src}mlp.{a}_proj.weight"] = f"{dst}mlp.{b}.weight"
            continue
        names[src + "block_sparse_moe.gate.weight"] = dst + "mlp.gate.weight"
        for e in range(config.n_experts):
            for w in ("w1", "w2", "w3"):
                names[f"{src}block_sparse_moe.experts.{e}.{w}.weight"] = (
                    f"{dst}mlp.experts.{e}.{w}.weight"
                )
    return names
