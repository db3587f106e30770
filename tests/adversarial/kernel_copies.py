"""Cheat: flash_attention computes attention with PyTorch and launches a kernel that only copies.

The scores and the weighted sum are broadcast products and sums (no FLOPs for the FLOP
counter), and a Triton kernel is launched, so "launches a kernel" and "no matmul FLOPs outside
it" both hold. Caught because the work PyTorch does outside the kernel is bounded on every call
by a few passes over the inputs and the output, whatever the number of keys.
"""

KATA = "flash_attention"
TESTS = ["test_flash_attention_leaves_no_attention_work_to_pytorch"]
EXPECT = "over budget: flash_attention"
REPLACE = {
    "flash_attention": """
        @triton.jit
        def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(dst + offsets, tl.load(src + offsets, mask=offsets < n), mask=offsets < n)


        def flash_attention(q, k, v, causal=False, sm_scale=None):
            _check_inputs(q, k, v)
            D = q.shape[-1]
            if D not in _KERNEL_HEAD_DIMS:
                raise ValueError(f"head dim must be one of {_KERNEL_HEAD_DIMS}, got {D}")
            H, Hkv, Nq, Nk = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
            kk = k.repeat_interleave(H // Hkv, dim=1).float()
            vv = v.repeat_interleave(H // Hkv, dim=1).float()
            s = (q.float()[..., :, None, :] * kk[..., None, :, :]).sum(-1)
            s = s * _softmax_scale(sm_scale, D)
            if causal:
                seen = torch.arange(Nk)[None, :] <= torch.arange(Nq)[:, None] + (Nk - Nq)
                s = s.masked_fill(~seen, float("-inf"))
            p = torch.softmax(s, dim=-1).nan_to_num(0.0)
            out = (p[..., None] * vv[..., None, :, :]).sum(-2).to(q.dtype).contiguous()
            result = torch.empty_like(out)
            _copy_kernel[(triton.cdiv(out.numel(), 1024),)](out, result, out.numel(), BLOCK=1024)
            return result
    """,
}
