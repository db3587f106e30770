"""Cheat: flash_attention answers with the level-1 PyTorch loop instead of a Triton kernel.

tiled_attention is exact, so every number matches; but the level asks for a kernel, and on a GPU
this is many small PyTorch launches. Caught because the functions whose task is a kernel must
launch one (Triton launches are counted, also under the interpreter).
"""

KATA = "flash_attention"
TESTS = ["test_flash_attention_matches_oracle"]
EXPECT = "no kernel: flash_attention launched no Triton kernel"
REPLACE = {
    "flash_attention": """
        def flash_attention(q, k, v, causal=False, sm_scale=None):
            D = q.shape[-1] if isinstance(q, torch.Tensor) else 0
            if D not in _KERNEL_HEAD_DIMS:
                raise ValueError(f"head dim must be one of {_KERNEL_HEAD_DIMS}, got {D}")
            return tiled_attention(q, k, v, causal, sm_scale, block_size=16)
    """,
}
