"""What a kata's Triton kernels would use on real GPUs, read from kernels compiled without one.

    python -m grading.gpu.kernel_report KATA [--impl solution|reference|PATH] [--json]

For each kernel, configuration and target (sm_80: A100, sm_90: H100/H200): registers per thread,
bytes spilled to local memory, shared memory per block, warps and pipeline stages, the
tensor-core instructions found in the machine code (HMMA; on sm_90 also HGMMA, the SASS name of
WGMMA), and the occupancy that allows. A line starting with `!` names a visible reason for
slowness. The calls compiled are the kata's `GPU_CALLS` (katas/<kata>/test_<kata>_compile.py).

--json prints a list of {"kernel", "target", "config", "registers", "spill_bytes",
"shared_bytes", "tensor_cores"}, one per compiled kernel and target.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grading.gpu.aot import TARGETS, CompileResult, KernelBuild, as_json, compile_calls
from grading.judge.impl import KATAS_DIR, ImplError, kata_names, load_module, resolve_impl


def compile_checks(kata: str) -> Path:
    return KATAS_DIR / kata / f"test_{kata}_compile.py"


def gpu_calls(kata: str) -> list:
    """The kata's GPU_CALLS, or ImplError if the kata has no compile checks (no kernels)."""
    path = compile_checks(kata)
    if not path.is_file():
        with_kernels = [k for k in kata_names() if compile_checks(k).is_file()]
        raise ImplError(
            f"{kata} has no Triton kernels to report on (no {path.name}); katas with kernels: "
            f"{', '.join(with_kernels) or 'none'}"
        )
    return load_module(path, f"compile_checks_of_{kata}").GPU_CALLS


def unique_builds(result: CompileResult) -> list[tuple[KernelBuild, list[str]]]:
    """Each compiled kernel once per target, with the functions whose calls launch it."""
    found: dict[tuple, tuple[KernelBuild, list[str]]] = {}
    for b in result.builds:
        if b.error:
            continue
        build, functions = found.setdefault((b.target, b.binary), (b, []))
        function = b.call.split("(")[0]
        if function not in functions:
            functions.append(function)
    return list(found.values())


def _settings(build: KernelBuild) -> dict:
    return {k: v for k, v in build.config.items() if k not in ("num_warps", "num_stages")}


def text_report(kata: str, impl: str, result: CompileResult) -> str:
    lines = [f"{kata}: the kernels of {impl}, compiled by Triton {result.triton} (not run)"]
    lines += [f"{target}: skipped, {why}" for target, why in result.unavailable.items()]
    builds = unique_builds(result)
    for kernel in sorted({b.kernel for b, _ in builds}):
        rows = [(b, f) for b, f in builds if b.kernel == kernel]
        settings = [_settings(b) for b, _ in rows]
        common = {k: v for k, v in settings[0].items() if all(s.get(k) == v for s in settings)}
        lines += ["", f"{kernel}, in every row: " + " ".join(f"{k}={v}" for k, v in common.items())]
        lines.append(
            "  target  regs  spill B  shared KiB  warps  stages  tensor cores  blocks/SM  "
            "occupancy  settings; launched by"
        )
        rows.sort(key=lambda row: (*_settings(row[0]).values(), row[1], row[0].target))
        for b, functions in rows:
            own = " ".join(f"{k}={v}" for k, v in _settings(b).items() if k not in common)
            lines.append(
                f"  {b.target:<6}  {b.registers:>4}  {b.spill_bytes:>7}  "
                f"{b.shared_bytes / 1024:>10.1f}  {b.num_warps:>5}  {b.num_stages:>6}  "
                f"{','.join(b.tensor_cores) or 'none':<12}  {b.blocks_per_sm():>9}  "
                f"{b.occupancy():>9.0%}  {own}; {', '.join(functions)}"
            )
            lines += [f"    ! {b.target} ({TARGETS[b.target].name}): {note}" for note in b.notes()]
    problems: dict[str, list[str]] = {}
    for c in result.calls:
        if c["error"] or c.get("not_implemented"):
            problems.setdefault(c["error"] or c["not_implemented"], []).append(c["call"])
    for message, calls in problems.items():
        also = f" (and {len(calls) - 1} more calls)" if len(calls) > 1 else ""
        lines.append(f"\n{calls[0]}{also}: {message}")
    failed = [b for b in result.builds if b.error]
    for b in failed[:3]:
        lines.append(f"\n{b.kernel} does not compile for {b.target} ({b.call}):\n{b.error}")
    if len(failed) > 3:
        lines.append(f"... {len(failed) - 3} more launches do not compile")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grading.gpu.kernel_report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("kata", choices=kata_names())
    parser.add_argument("--impl", default="solution", help="solution (default), reference or PATH")
    parser.add_argument("--json", action="store_true", help="print the pinned JSON list")
    args = parser.parse_args(argv)
    try:
        calls = gpu_calls(args.kata)
        path = resolve_impl(args.kata, args.impl)
    except ImplError as exc:
        print(exc, file=sys.stderr)
        return 2
    result = compile_calls(path, calls)
    if result.error:
        print(f"{path}: {result.error}", file=sys.stderr)
        return 1
    failed = any(c["error"] or c.get("not_implemented") for c in result.calls)
    failed = failed or any(b.error for b in result.builds)
    if args.json:
        print(json.dumps([as_json(b) for b, _ in unique_builds(result)], indent=1))
    else:
        print(text_report(args.kata, str(path), result))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
