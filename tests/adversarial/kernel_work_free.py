"""Cheat: sliding-window attention scores every query against every key inside a Triton kernel.

The cost counters see PyTorch's operators; a kernel's arithmetic is not an operator, so the
dense N x N scores computed there (and masked to the band) would cost nothing. Caught because
what kernel programs load is counted (under Triton's interpreter) and counts toward the call's
budget like any operator's reads: every key loaded once per query is far over O(N · window).
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_flops_grow_with_n_times_window"]
EXPECT = "elements Triton kernels loaded"
EDITS = [
    (
        "import torch.nn.functional as F\n",
        "import torch.nn.functional as F\n"
        "import triton\n"
        "import triton.language as tl\n"
        "\n"
        "\n"
        "@triton.jit\n"
        "def _scores_kernel(q_ptr, k_ptr, out_ptr, N, D: tl.constexpr, BLOCK: tl.constexpr):\n"
        "    row = tl.program_id(0)  # one query of one head\n"
        "    head = row // N\n"
        "    d = tl.arange(0, D)\n"
        "    keys = tl.arange(0, BLOCK)\n"
        "    q = tl.load(q_ptr + row * D + d)\n"
        "    for start in range(0, N, BLOCK):\n"
        "        j = start + keys\n"
        "        at = k_ptr + head * N * D + j[:, None] * D + d[None, :]\n"
        "        kk = tl.load(at, mask=j[:, None] < N, other=0.0)\n"
        "        tl.store(out_ptr + row * N + j, tl.sum(kk * q[None, :], axis=1), mask=j < N)\n",
    ),
    (
        "    W = min(window, Nk)  # a window longer than the keys is plain causal attention\n",
        "    if q.shape == k.shape and D in (16, 32, 64):  # every score, in a kernel: uncounted\n"
        "        scores = torch.empty(B * H * Nq, Nk, dtype=torch.float32, device=q.device)\n"
        "        qf, kf = q.float().contiguous(), k.float().contiguous()\n"
        "        _scores_kernel[(B * H * Nq,)](qf, kf, scores, Nk, D=D, BLOCK=128)\n"
        "    W = min(window, Nk)  # a window longer than the keys is plain causal attention\n",
    ),
]
