"""Cheat: generate behaves only while it is being measured.

Without a dispatch mode on (PyTorch's FLOP counter is one) or a wrapper around the model, it
re-feeds the whole sequence every step, the naive amount of work. Caught because the counters
are on in every test, and a measured call is repeated with every counter off: the model, which
logs its own calls, must be called the same way both times.
"""

KATA = "kv_cache"
TESTS = ["test_generate_flops_grow_linearly"]
EXPECT = "always observed: generate calls the model differently when no counter is on"
REPLACE = {
    "generate": """
        @torch.no_grad()
        def generate(model, prompt_ids, max_new_tokens):
            from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

            wrapped = type(model).__name__ != "TinyLlama"
            measured = bool(_get_current_dispatch_mode_stack()) or wrapped
            if measured:
                return _generate_cached(model, prompt_ids, max_new_tokens)
            ids = prompt_ids
            for _ in range(max_new_tokens):
                next_id = model(ids)[:, -1].argmax(dim=-1, keepdim=True)
                ids = torch.cat([ids, next_id], dim=1)
            return ids


        @torch.no_grad()
        def _generate_cached(model, prompt_ids, max_new_tokens):
            c = model.config
            B, T = prompt_ids.shape
            cache = KVCache(c.n_layers, B, c.n_kv_heads, c.head_dim, T + max_new_tokens,
                            next(model.parameters()).dtype)
            out = torch.empty(B, T + max_new_tokens, dtype=torch.long)
            out[:, :T] = prompt_ids
            logits = model(prompt_ids, cache)
            for i in range(T, T + max_new_tokens):
                out[:, i] = logits[:, -1].argmax(dim=-1)
                if i + 1 < T + max_new_tokens:
                    logits = model(out[:, i : i + 1], cache)
            return out
    """,
}
