"""Bug: one tile configuration for every device, 16 queries by 8 keys, so `tl.dot(p, v)` has K = 8.

Small tiles make the short CPU test sequences cross many blocks, and Triton's interpreter
multiplies tiles of any size, so every CPU test passes. The GPU compiler requires K >= 16 for
`tl.dot` on float16 and bfloat16 tiles: on a GPU this kernel does not compile at all.
"""

CAUGHT_BY = [
    "test_flash_attention_kernel_compiles_for_the_gpu",
    "test_lse_and_split_kv_kernels_compile_for_the_gpu",
]
REPLACE = {
    "_tile_config": '''
        def _tile_config(q: torch.Tensor) -> dict:
            """Tile sizes and launch settings: small tiles, so short sequences cross blocks."""
            return dict(BLOCK_M=16, BLOCK_N=8, num_warps=1, num_stages=1)
    ''',
}
