"""Cheat: attention in Python, from the bits of the floats read as integers.

`.tolist()` of a floating-point tensor is limited, of integers it is not (token ids); a bit-cast
view (`x.view(torch.int32)`) turns the floats into integers without changing a byte, and
`struct` turns them back in Python, where no counter sees the arithmetic. Caught because
bit-casting floating-point data to integers inside a call fails at once.
"""

KATA = "efficient_attention"
TESTS = ["test_sliding_window_worked_example"]
EXPECT = "off the books: the implementation bit-cast a torch.float32 tensor"
REPLACE = {
    "sliding_window_attention": """
        def sliding_window_attention(q, k, v, window, sm_scale=None):
            import struct

            _check_attention_inputs(q, k, v)
            _check_int("window", window, 1)

            def floats(t):
                bits = t.float().contiguous().view(torch.int32).flatten().tolist()
                return [struct.unpack("f", struct.pack("i", b))[0] for b in bits]

            H = q.shape[1]
            return _python_attention(
                floats(q), floats(_expand_kv(k, H)), floats(_expand_kv(v, H)), q, k, v, window,
                sm_scale,
            )


        def _python_attention(qs, ks, vs, q, k, v, window, sm_scale):
            B, H, Nq, D = q.shape
            Nk, Dv = k.shape[2], v.shape[3]
            scale = _softmax_scale(sm_scale, D)
            out = []
            for bh in range(B * H):
                for i in range(Nq):
                    p = i + Nk - Nq
                    js = range(max(0, p - window + 1), min(p, Nk - 1) + 1)
                    s = [
                        scale * sum(qs[(bh * Nq + i) * D + d] * ks[(bh * Nk + j) * D + d]
                                    for d in range(D))
                        for j in js
                    ]
                    top = max(s, default=0.0)
                    e = [math.exp(x - top) for x in s]
                    z = sum(e) or 1.0
                    out += [
                        sum(w * vs[(bh * Nk + j) * Dv + c] for w, j in zip(e, js)) / z
                        for c in range(Dv)
                    ]
            return torch.tensor(out).reshape(B, H, Nq, Dv).to(q.dtype)
    """,
}
