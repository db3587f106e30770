"""Level 3: what each method does to a head asked for more positions than it was trained on.

    python -m katas.context_extension.experiment                   # your solution
    python -m katas.context_extension.experiment --impl reference  # or any .py file
    python -m katas.context_extension.experiment --trained 2048 --factor 8 --head-dim 128

Prints three tables, in well under a second:

1. The wavelength (tokens per full turn) of every RoPE pair under each method. A `!` marks a
   pair that, somewhere in the longer input, reaches an angle it never reached in training:
   its wavelength is longer than the trained length, so training only saw part of its circle,
   and now it turns past that part. Those are the pairs that make a model fall apart.
2. How finely neighbouring tokens are told apart: the angle the fastest pair turns per token.
   Position interpolation pays for having no `!` here: it blurs neighbours.
3. ALiBi, which has no angles at all: each head's bias at a few distances.
"""

from __future__ import annotations

import argparse
import math
import sys
from types import ModuleType

from grading.judge.impl import load_impl


def _unseen(original: float, scaled: float, trained: int, longest: int) -> bool:
    """Does a pair, at positions up to `longest`, turn further than it ever did in training?

    A pair that completed a full turn within the trained length has seen every angle. Any other
    pair saw the angles up to trained * original, and goes past them if longest * scaled does.
    """
    full_turn_in_training = trained * original >= 2 * math.pi
    return not full_turn_in_training and longest * scaled > trained * original * (1 + 1e-6)


def report(
    impl: ModuleType,
    *,
    head_dim: int = 16,
    base: float = 10000.0,
    trained: int = 256,
    factor: float = 4.0,
    n_heads: int = 8,
) -> str:
    """The three tables as text, computed with `impl`'s functions."""
    longest = math.ceil(factor * trained)
    yarn, attention_factor = impl.yarn_inv_freq(head_dim, base, factor, trained)
    methods = {
        "plain": impl.rope_inv_freq(head_dim, base),
        "linear": impl.linear_scaled_inv_freq(head_dim, base, factor),
        "ntk": impl.ntk_scaled_inv_freq(head_dim, base, factor),
        f"dynamic@{longest}": impl.dynamic_ntk_inv_freq(head_dim, base, factor, longest, trained),
        "yarn": yarn,
    }
    plain = methods["plain"].tolist()

    lines = [
        f"RoPE head_dim {head_dim}, base {base:g}, trained on {trained} positions, "
        f"asked for {longest} (factor {factor:g})",
        "",
        "1. wavelength of each pair in tokens (! = reaches angles unseen in training)",
        "pair " + "".join(f"{name:>14}" for name in methods),
    ]
    for i in range(head_dim // 2):
        cells = []
        for inv_freq in methods.values():
            f = float(inv_freq[i])
            mark = "!" if _unseen(plain[i], f, trained, longest) else " "
            cells.append(f"{2 * math.pi / f:13.1f}{mark}")
        lines.append(f"{i:4d} " + "".join(cells))
    unseen = [
        sum(_unseen(p, float(f), trained, longest) for p, f in zip(plain, inv_freq, strict=True))
        for inv_freq in methods.values()
    ]
    lines.append("  ! " + "".join(f"{n:>13d} " for n in unseen))

    lines += [
        "",
        "2. neighbours: radians the fastest pair turns per token (plain RoPE: 1)",
        "     " + "".join(f"{float(inv_freq[0]):14.3f}" for inv_freq in methods.values()),
        f"   yarn also scales attention logits' temperature by {attention_factor:.4f}",
        "",
        f"3. alibi: bias per head at distance d ({n_heads} heads, no trained length to outgrow)",
    ]
    distances = [1, trained, longest - 1]
    bias = impl.alibi_bias(n_heads, 1, longest)[:, 0]  # (H, longest): the newest query's row
    lines.append("head  slope" + "".join(f"{f'd={d}':>12}" for d in distances))
    for h, slope in enumerate(impl.alibi_slopes(n_heads).tolist()):
        cells = "".join(f"{float(bias[h, longest - 1 - d]):12.3f}" for d in distances)
        lines.append(f"{h:4d} {slope:6.4f}{cells}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="solution", help="solution, reference, or a .py path")
    parser.add_argument("--head-dim", type=int, default=16)
    parser.add_argument("--base", type=float, default=10000.0)
    parser.add_argument("--trained", type=int, default=256, help="the trained length L0")
    parser.add_argument("--factor", type=float, default=4.0, help="how much longer to go")
    args = parser.parse_args(argv)
    impl = load_impl("context_extension", args.impl)
    print(
        report(
            impl, head_dim=args.head_dim, base=args.base, trained=args.trained, factor=args.factor
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
