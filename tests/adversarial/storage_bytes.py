"""Cheat: rope_cos_sin in Python, the numbers read as the raw bytes of their storage.

No `.numpy()`, no `.tolist()`, no bit-cast: `bytes(t.untyped_storage())` hands the memory to
Python, `struct` turns it back into floats, and the cosines and sines are computed where no
counter sees them. Caught because reading a storage into Python (as bytes, with list(), a loop
or `storage[i]`) counts toward the same limit as `.tolist()`.
"""

KATA = "context_extension"
TESTS = ["test_rope_cos_sin_of_a_long_prompt"]
EXPECT = "off the books: the implementation took the 24000 numbers of a tensor's storage"
REPLACE = {
    "rope_cos_sin": """
        def rope_cos_sin(positions, inv_freq):
            import struct

            if positions.dim() != 1:
                raise ValueError(f"positions: expected a 1-D tensor [N], got {positions.dim()}-D")
            if inv_freq.dim() != 1:
                raise ValueError(f"inv_freq: expected a 1-D tensor [D/2], got {inv_freq.dim()}-D")

            def numbers(t):
                t = t.to(torch.float64).contiguous()
                return struct.unpack(f"<{t.numel()}d", bytes(t.untyped_storage()))

            freqs = numbers(inv_freq)
            rows_cos, rows_sin = [], []
            for p in numbers(positions):
                angles = [p * f for f in freqs]
                rows_cos.append([math.cos(a) for a in angles] * 2)
                rows_sin.append([math.sin(a) for a in angles] * 2)
            shape = (len(rows_cos), 2 * len(freqs))
            cos = torch.tensor(rows_cos, dtype=torch.float32).reshape(shape)
            sin = torch.tensor(rows_sin, dtype=torch.float32).reshape(shape)
            return cos, sin
    """,
}
