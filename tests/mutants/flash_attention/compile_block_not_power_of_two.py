"""Bug: 48 keys per block at head dim 128, to leave room in shared memory.

Three stages of 64-key K and V tiles look large, and 48 is a natural step down; but every Triton
block (`tl.arange`) must span a power of two. The CPU tests use 16 x 16 tiles and never take
this GPU branch, so only compiling the kernel for a GPU shows it.
"""

CAUGHT_BY = [
    "test_flash_attention_kernel_compiles_for_the_gpu",
    "test_lse_and_split_kv_kernels_compile_for_the_gpu",
]
EDITS = [
    (
        "return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)",
        "return dict(BLOCK_M=128, BLOCK_N=48, num_warps=8, num_stages=3)",
    ),
]
