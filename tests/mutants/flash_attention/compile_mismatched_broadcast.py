"""Bug: the running sum l is sized by the key block (BLOCK_N) instead of the query block.

On the CPU both blocks are 16, so `l_i * alpha + tl.sum(p, 1)` lines up and every test passes.
On a GPU the query block is 128 and the key block 64: the compiler refuses to combine a (64,)
tile with a (128,) one. Name each tile's size after what it indexes: one entry per query.
"""

CAUGHT_BY = [
    "test_flash_attention_kernel_compiles_for_the_gpu",
    "test_lse_and_split_kv_kernels_compile_for_the_gpu",
]
EDITS = [
    (
        "l_i = tl.zeros([BLOCK_M], dtype=tl.float32)",
        "l_i = tl.zeros([BLOCK_N], dtype=tl.float32)",
    ),
]
