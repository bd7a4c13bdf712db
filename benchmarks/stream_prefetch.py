"""Streamed data (``data.streaming``): tokenizing in a background thread against in the loop.

    .venv/bin/python benchmarks/stream_prefetch.py

A streamed run tokenizes and packs its text while it trains. Side by side, interleaved, on the
same text, model and batches: training steps fed by ``StreamBatches.iterate`` with the
tokenizer working ``prefetch=2`` steps ahead in a background thread, and with ``prefetch=0``
(tokenizing in the loop between steps, as before). The model is the quickstart's shape (4
layers, width 256, block 128, batch 16); the text is the builtin corpus, repeated. The last
line is the ratio of steps per second, prefetched over in-loop.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

STEPS = 12
ROUNDS = 3


def main() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data import builtin
    from clustertune.data.loader import Position, StreamBatches
    from clustertune.data.stream import BlockStream
    from clustertune.models.tokenizer import train_bpe

    paras = builtin.pydoc_paragraphs()
    tok = train_bpe(paras, 4096, classification=False, model_max_length=128)
    texts = paras * 6  # several passes' worth, so no run reaches the end of the text
    stream = BlockStream(lambda: iter(texts), tok, 128, chunk_texts=200)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=4, n_positions=128, vocab_size=len(tok),
                                       bos_token_id=0, eos_token_id=0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cpu = torch.device("cpu")

    def steps_per_s(prefetch: int, start: int) -> float:
        # Each round starts further into the text, so neither side reads text the other cached.
        batches = StreamBatches(stream, 16, 1, 0, 1)
        it = batches.iterate(Position(0, start, start, None), cpu, prefetch=prefetch)
        next(it)  # the stream's first chunk and the pre-token cache: not part of the steady state
        t0 = time.perf_counter()
        for _ in range(STEPS):
            (batch,), _ = next(it)
            model(**batch).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        took = time.perf_counter() - t0
        it.close()
        return STEPS / took

    inline, ahead = [], []
    for r in range(ROUNDS):
        inline.append(steps_per_s(0, 400 * (2 * r)))
        ahead.append(steps_per_s(2, 400 * (2 * r + 1)))
        print(f"round {r}: in-loop {inline[-1]:.2f} steps/s, prefetched {ahead[-1]:.2f} steps/s", flush=True)
    a, b = sum(inline) / ROUNDS, sum(ahead) / ROUNDS
    print(f"threads {torch.get_num_threads()}; in-loop {a:.2f} steps/s, prefetched {b:.2f} steps/s")
    print(f"ratio={b / a:.2f}")


if __name__ == "__main__":
    main()
