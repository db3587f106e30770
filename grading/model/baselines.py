"""What users would otherwise reach for: Hugging Face `transformers` generation on the very same
weights, for the serving benchmark to measure an engine against.

    hf = as_transformers(model)                        # the shared model, as transformers runs it
    tokens = transformers_static(hf, requests, 8)      # batched `generate`, a static KV cache
    tokens = transformers_static(hf, requests, 8, cache="dynamic")   # ... a growing one
    tokens = transformers_continuous(hf, requests)     # `generate_batch`, where it exists

Both return each request's new tokens, greedy, in the order of `requests`. Neither honours
arrivals: each serves the whole workload as if every request were already waiting, which favours
them against an engine that must wait for its requests. Needs the `models` extra.
"""

from __future__ import annotations

import tempfile

import torch

from grading.model.hf import save_checkpoint


def as_transformers(model):
    """The shared model (dense or mixture) as a `transformers` model with the same weights, in
    the same dtype and on the same device, in eval mode."""
    from transformers import AutoModelForCausalLM

    weight = model.embed.weight
    with tempfile.TemporaryDirectory() as folder:
        save_checkpoint(model, folder)
        hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return hf.to(device=weight.device, dtype=weight.dtype).eval()


@torch.no_grad()
def transformers_static(
    hf, requests, max_batch_size: int, cache: str = "static"
) -> list[list[int]]:
    """Static batching with `generate`: requests in arrival order, max_batch_size at a time,
    prompts padded on the left, each group decoding as long as its longest request needs.
    `cache`: "static" (preallocated for the group's whole length) or "dynamic" (grown a token
    at a time), `generate`'s `cache_implementation`."""
    if cache not in ("static", "dynamic"):
        raise ValueError(f"cache: expected 'static' or 'dynamic', got {cache!r}")
    device = hf.device
    order = sorted(range(len(requests)), key=lambda i: (requests[i].arrival, i))
    out: list[list[int]] = [[] for _ in requests]
    for g in range(0, len(order), max_batch_size):
        group = [requests[i] for i in order[g : g + max_batch_size]]
        width = max(len(r.prompt) for r in group)
        ids = torch.zeros(len(group), width, dtype=torch.long, device=device)  # (B, width)
        mask = torch.zeros_like(ids)
        for row, r in enumerate(group):  # left padding: every prompt ends at the last column
            ids[row, width - len(r.prompt) :] = torch.tensor(r.prompt, device=device)
            mask[row, width - len(r.prompt) :] = 1
        new = hf.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=max(r.max_new_tokens for r in group),
            min_new_tokens=max(r.max_new_tokens for r in group),  # no early stop at an EOS id
            do_sample=False,
            pad_token_id=0,
            cache_implementation=cache,
        )[:, width:]  # (B, new)
        for row, i in enumerate(order[g : g + max_batch_size]):
            out[i] = new[row, : requests[i].max_new_tokens].tolist()
    return out


@torch.no_grad()
def transformers_continuous(
    hf, requests, max_batch_size: int = 32, block_size: int = 16
) -> list[list[int]] | None:
    """Continuous batching with `generate_batch` (transformers 5 and later), its paged cache
    sized for the whole workload, every request decoding the workload's longest length and cut
    to its own; None where it is missing."""
    if not hasattr(hf, "generate_batch"):
        return None
    from transformers import GenerationConfig
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    longest = max(r.max_new_tokens for r in requests)
    config = GenerationConfig(
        max_new_tokens=longest, min_new_tokens=longest, do_sample=False, eos_token_id=-1
    )
    tokens = sum(len(r.prompt) + longest for r in requests)
    paging = ContinuousBatchingConfig(
        page_size=block_size,
        num_blocks=-(-tokens // block_size) + len(requests),
        max_requests_per_batch=max_batch_size,
        max_batch_tokens=max(len(r.prompt) for r in requests) + max_batch_size,
    )
    prompts = [list(r.prompt) for r in requests]
    results = hf.generate_batch(prompts, config, paging, progress_bar=False, warmup=False)
    by_order = [results[key] for key in sorted(results, key=lambda k: int(k.split("_")[-1]))]
    return [
        list(result.generated_tokens[: r.max_new_tokens])
        for result, r in zip(by_order, requests, strict=True)
    ]
