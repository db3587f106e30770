"""Cheat: split_kv_decode computes attention with PyTorch and launches a kernel that only copies.

One decoding query's scores and weighted sum are broadcast products and sums over k and v (no
FLOPs for the FLOP counter), no larger than k and v themselves, so they fit within a few passes
over the inputs; a Triton kernel is launched, and no kernel program reads every key. Caught
because outside the kernel a kernel task multiplies only q and the output (or the partial
results), never the keys or values, on every call.
"""

KATA = "flash_attention"
TESTS = ["test_split_kv_decode_over_long_and_extreme_inputs"]
EXPECT = "products with k or v (q·kᵀ, p·v) belong in the kernel"
REPLACE = {
    "split_kv_decode": """
        @triton.jit
        def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < n), mask=offsets < n)


        def split_kv_decode(q, k, v, sm_scale=None, num_splits=8):
            _check_inputs(q, k, v)
            B, H, Nq, D = q.shape
            Hkv = k.shape[1]
            if D not in _KERNEL_HEAD_DIMS:
                raise ValueError(f"head dim must be one of {_KERNEL_HEAD_DIMS}, got {D}")
            if Nq != 1:
                raise ValueError(f"q must be (B, H, 1, D), got {tuple(q.shape)}")
            if num_splits < 1:
                raise ValueError(f"num_splits must be at least 1, got {num_splits}")
            # (B, Hkv, group, 1, D) against k (B, Hkv, 1, Nk, D): no copy of k or v per group.
            qg = q.float().reshape(B, Hkv, H // Hkv, 1, D) * _softmax_scale(sm_scale, D)
            p = torch.softmax((qg * k[:, :, None]).sum(-1), dim=-1)  # (B, Hkv, group, Nk)
            out = (p[..., None] * v[:, :, None]).sum(-2).reshape(B, H, 1, D).to(q.dtype)
            result = torch.empty_like(out)
            _copy_kernel[(triton.cdiv(out.numel(), 1024),)](out, result, out.numel(), BLOCK=1024)
            return result
    """,
}
