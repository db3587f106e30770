"""Train the small byte-level models the repository ships: a target and a draft that agree.

    python -m grading.model.train                       # both models, about 15 minutes on two cores
    python -m grading.model.train --steps 20 --out DIR  # a quick run, e.g. to check the script

The text is one every machine has: the Python standard library's own source (the top-level
`*.py` files of the running interpreter). Tokens are bytes (vocabulary 256), so no tokenizer is
needed: `encode(text)` and `decode(ids)` below. A few modules are held out for measuring
(`HELD_OUT`); they exist in every Python from 3.10 on.

Each model is written as a Hugging Face checkpoint folder (config.json, model.safetensors), so
`grading.model.from_pretrained` loads it like any other, with `training.json` beside it: the
command, seed, Python version, steps, losses and the weights' sha256. The loss curve is drawn to
`loss.png` in the output folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import sysconfig
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from grading.model.hf import from_pretrained, save_checkpoint
from grading.model.layers import ModelConfig
from grading.model.llama import TinyLlama

SHIPPED = Path(__file__).parent / "checkpoints"  # the folder the shipped checkpoints live in
HELD_OUT = ("textwrap", "heapq", "bisect", "fnmatch", "colorsys", "shlex", "string", "glob")
CONTEXT = 128

TARGET = ModelConfig(
    n_layers=4, n_heads=4, n_kv_heads=2, head_dim=32, vocab_size=256,
    max_seq_len=CONTEXT, hidden_dim=384, qk_gain=1.0,
)  # fmt: skip
DRAFT = ModelConfig(
    n_layers=1, n_heads=2, n_kv_heads=1, head_dim=32, vocab_size=256,
    max_seq_len=CONTEXT, hidden_dim=192, qk_gain=1.0,
)  # fmt: skip


def encode(text: str) -> torch.Tensor:
    """The text's UTF-8 bytes as token ids, LongTensor [T]."""
    return torch.tensor(list(text.encode()), dtype=torch.long)


def decode(ids) -> str:
    """Token ids back to text (bytes that do not form UTF-8 show as �)."""
    return bytes(int(i) for i in ids).decode(errors="replace")


def stdlib_source(held_out: bool) -> str:
    """The standard library's top-level modules, training ones or the held-out ones."""
    folder = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(folder.glob("*.py"))
    chosen = [f for f in files if (f.stem in HELD_OUT) == held_out]
    return "\n".join(f.read_text(errors="replace") for f in chosen)


def batches(data: torch.Tensor, batch: int, gen: torch.Generator):
    """Endless random windows of CONTEXT + 1 bytes: inputs (B, CONTEXT) and next bytes."""
    while True:
        starts = torch.randint(0, data.numel() - CONTEXT - 1, (batch,), generator=gen)
        window = torch.stack([data[s : s + CONTEXT + 1] for s in starts.tolist()])
        yield window[:, :-1], window[:, 1:]


def initialised(config: ModelConfig, seed: int) -> TinyLlama:
    torch.manual_seed(seed)
    model = TinyLlama(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.02 if name == "embed.weight" else 1 / math.sqrt(p.shape[1]))
    return model


def train(config: ModelConfig, data: torch.Tensor, steps: int, seed: int, batch: int = 16):
    """AdamW with warm-up and cosine decay; returns the model and its loss per step."""
    model = initialised(config, seed).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    losses = []
    data_iter = batches(data, batch, torch.Generator().manual_seed(seed))
    for step in range(steps):
        x, y = next(data_iter)
        logits = model(x)  # (B, CONTEXT, 256)
        loss = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        schedule.step()
        model.calls.clear()  # the model logs every call; training needs no log
        losses.append(loss.item())
        if step % 50 == 0 or step == steps - 1:
            print(f"  step {step:5d}/{steps}  loss {loss.item():.3f}", flush=True)
    return model.eval(), losses


@torch.no_grad()
def agreement(target: TinyLlama, draft: TinyLlama, text: torch.Tensor) -> float:
    """How often the draft's most likely next byte is the target's, over `text` read in
    windows of CONTEXT bytes: the greedy acceptance rate of one proposal."""
    windows = text[: text.numel() // CONTEXT * CONTEXT].view(-1, CONTEXT)  # (W, CONTEXT)
    if not len(windows):
        raise ValueError(f"text: expected at least {CONTEXT} bytes, got {text.numel()}")
    same = (target(windows).argmax(-1) == draft(windows).argmax(-1)).float()
    return same.mean().item()


def lookup(context: torch.Tensor, k: int, max_ngram: int = 3) -> torch.Tensor:
    """Prompt lookup: up to k bytes that followed the most recent earlier occurrence of the
    context's last max_ngram bytes (then fewer); none if the tail never occurred before."""
    L = context.numel()
    for n in range(min(max_ngram, L - 1), 0, -1):
        hits = (context[: L - 1].unfold(0, n, 1) == context[L - n :]).all(-1).nonzero()
        if hits.numel():
            start = int(hits[-1, 0]) + n
            return context[start : start + k]
    return context[:0]


@torch.no_grad()
def speculation(
    target: TinyLlama, draft: TinyLlama, text: torch.Tensor, samples: int, k: int = 4, seed: int = 0
) -> dict[str, dict[str, float]]:
    """Greedy speculative decoding measured at `samples` random places in `text`: at each, the
    context is the CONTEXT - k bytes before it, a proposer offers up to k bytes (the draft, greedy;
    or prompt lookup in the context), and the target checks them in one call, as a speculative
    step does. Per proposer: acceptance (accepted / proposed bytes), how often it proposed
    anything, and the bytes each target call yields (accepted + the target's own next byte)."""
    span = CONTEXT - k
    if text.numel() <= span:
        raise ValueError(f"text: expected more than {span} bytes, got {text.numel()}")
    gen = torch.Generator().manual_seed(seed)
    places = torch.randint(span, text.numel() + 1, (samples,), generator=gen).tolist()

    def by_draft(context: torch.Tensor) -> torch.Tensor:
        ids = context
        for _ in range(k):
            ids = torch.cat([ids, draft(ids[None])[0, -1].argmax()[None]])
        return ids[context.numel() :]

    results = {}
    for name, propose in (("draft", by_draft), ("lookup", lambda c: lookup(c, k))):
        proposed = accepted = offered = 0
        for end in places:
            context = text[end - span : end]  # (span,)
            proposal = propose(context)  # (m,), m <= k
            choice = target(torch.cat([context, proposal])[None])[0, span - 1 :].argmax(-1)
            run = int((choice[: proposal.numel()] == proposal).long().cumprod(0).sum())
            proposed, accepted = proposed + proposal.numel(), accepted + run
            offered += proposal.numel() > 0
        results[name] = {
            "acceptance": round(accepted / max(proposed, 1), 4),
            "proposed_at": round(offered / samples, 4),
            "bytes_per_target_call": round((accepted + samples) / samples, 4),
        }
    return results


def measure(target: TinyLlama, draft: TinyLlama, held: torch.Tensor, samples: int) -> dict:
    """What agreement.json records: the one-proposal agreement over `held` and greedy
    speculation with k = 4 at `samples` places of it."""
    return {
        "held_out_bytes": held.numel(),
        "greedy_agreement": round(agreement(target, draft, held), 4),
        "k": 4,
        "samples": samples,
        **speculation(target, draft, held, samples),
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def draw_losses(curves: dict[str, list[float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, losses in curves.items():
        ax.plot(losses, label=name, linewidth=1)
    ax.set(xlabel="step", ylabel="cross-entropy (nats per byte)", title="training loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600, help="steps per model (default 600)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--out", type=Path, default=SHIPPED, help=f"folder (default {SHIPPED})")
    parser.add_argument(
        "--measure", type=int, default=65536, help="held-out bytes to measure on (default 65536)"
    )
    parser.add_argument(
        "--samples", type=int, default=512, help="places speculation is measured at (default 512)"
    )
    parser.add_argument(
        "--only-measure", action="store_true", help="measure the models in --out; train nothing"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, torch.get_num_threads()))  # the same result on any machine
    data, held = encode(stdlib_source(False)), encode(stdlib_source(True))
    if args.only_measure:
        write_measures(args.out, held[: args.measure], args.samples)
        return
    print(
        f"training on {data.numel():,} bytes of standard-library source, {held.numel():,} held out"
    )
    curves = {}
    for name, config in (("target", TARGET), ("draft", DRAFT)):
        began = time.perf_counter()
        print(f"{name}: {sum(p.numel() for p in TinyLlama(config).parameters()):,} parameters")
        model, curves[name] = train(config, data, args.steps, args.seed)
        folder = args.out / name
        save_checkpoint(model, folder)
        record = {
            "command": f"python -m grading.model.train --steps {args.steps} --seed {args.seed}",
            "seed": args.seed,
            "steps": args.steps,
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "seconds": round(time.perf_counter() - began),
            "final_loss": round(sum(curves[name][-50:]) / len(curves[name][-50:]), 4),
            "sha256": sha256(folder / "model.safetensors"),
        }
        (folder / "training.json").write_text(json.dumps(record, indent=1) + "\n")
    draw_losses(curves, args.out / "loss.png")
    write_measures(args.out, held[: args.measure], args.samples)


def write_measures(folder: Path, held: torch.Tensor, samples: int) -> None:
    """Measure the pair in `folder` on held-out source; print and write agreement.json."""
    target, draft = (from_pretrained(folder / name).eval() for name in ("target", "draft"))
    record = measure(target, draft, held, samples)
    print(f"greedy agreement of draft and target on held-out source: {record['greedy_agreement']}")
    for name in ("draft", "lookup"):
        print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in record[name].items()))
    (folder / "agreement.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
