"""Bug: the packed batch is attended as one sequence: each row sees the rows before it.

Packing puts the rows back to back, and one causal attention over the packed tokens is what the
model does for a single sequence; but a row must see only its own keys, so every row after the
first reads other requests' context (and the work grows with the whole batch).
"""

CAUGHT_BY = ["test_with_room_each_request_starts_at_arrival_and_gains_a_token_every_step"]
REPLACE = {
    "_KVPool.attention": """
        def attention(self, rows):
            bs, device = self.block_size, self.k.device
            positions = torch.cat([torch.arange(s, s + t) for _, s, t in rows])  # (N,)
            tables = [torch.tensor(seq.blocks, device=device) for seq, _, _ in rows]
            blocks = torch.cat(
                [tables[b][torch.arange(s, s + t) // bs] for b, (_, s, t) in enumerate(rows)]
            )
            offsets = (positions % bs).to(device)  # (N,)

            def attend(layer, q, k, v):
                self.k[layer, blocks, :, offsets] = k
                self.v[layer, blocks, :, offsets] = v
                keys, values = [], []
                for table, (_, start, T) in zip(tables, rows, strict=True):
                    L = start + T
                    keys.append(self.k[layer, table].transpose(0, 1).flatten(1, 2)[:, :L])
                    values.append(self.v[layer, table].transpose(0, 1).flatten(1, 2)[:, :L])
                k_all, v_all = torch.cat(keys, dim=1), torch.cat(values, dim=1)  # (Hkv, sum L, hd)
                return _attend(q.transpose(0, 1), k_all, v_all).transpose(0, 1)  # (N, H, hd)

            return attend
    """,
}
