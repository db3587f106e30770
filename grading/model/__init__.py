"""The shared tiny Llama and what feeds it: the bottom of `grading/` but for `grading.devices`.

- `layers.py`: RMSNorm, RoPE, grouped-query attention, SwiGLU, the mixture of experts, a block;
- `llama.py`: the model (`TinyLlama`), its caches and its own log of calls;
- `hf.py`: Hugging Face checkpoints into the shared model and back (`from_pretrained`);
- `naive.py`: the naive server the serving kata is measured against (`Request`, `Completion`);
- `workload.py`: the serving workload, and prompts of held-out source for the trained pair;
- `baselines.py`: `transformers` generation on the same weights, for the serving benchmark;
- `latency.py`: time to first token and per output token of completions, for that benchmark;
- `train.py`: the training script of the small byte-level pair shipped in `checkpoints/`.

It imports nothing from `grading` but `grading.devices`. The names the katas teach are here:
`from grading.model import make_model, TinyLlama, from_pretrained, ...`.
"""

from grading.model.hf import from_pretrained, load_tokenizer
from grading.model.layers import (
    Attention,
    Block,
    ModelConfig,
    MoE,
    SwiGLU,
    apply_rope,
    causal_attention,
    causal_mask,
    rms_norm,
    rope_tables,
)
from grading.model.llama import (
    BatchCall,
    BatchRow,
    ModelCall,
    SequenceCache,
    TinyLlama,
    greedy_generate_no_cache,
    load_weights_in_place,
    make_model,
)

__all__ = [
    "Attention", "BatchCall", "BatchRow", "Block", "ModelCall", "ModelConfig", "MoE",
    "SequenceCache", "SwiGLU", "TinyLlama", "apply_rope", "causal_attention", "causal_mask",
    "from_pretrained", "greedy_generate_no_cache", "load_tokenizer", "load_weights_in_place",
    "make_model", "rms_norm", "rope_tables",
]  # fmt: skip
