"""Streamed data (``data.streaming``): tokenizing in a background thread against in the loop.

    .venv/bin/python benchmarks/stream_prefetch.py [--step model]

A streamed run tokenizes and packs its text while it trains. Side by side, interleaved, on the
same text and batches: steps fed by ``StreamBatches.iterate`` with the tokenizer working
``prefetch=2`` steps ahead in a background thread, and with ``prefetch=0`` (tokenizing in the
loop between steps, as before).

The step (default ``--step device``) stands for a GPU step: the host thread waits for the
device (the GIL released) for as long as tokenizing one step's text takes here, measured first;
that is where the loop starves on a GPU, whose steps are as short as the tokenizing. In-loop the
two add up; prefetched they overlap (ideal ratio 2). ``--step model`` trains a CPU model instead
(4 layers, width 256, batch 16 x 128), whose step dwarfs the tokenizing. The last line is the
ratio of steps per second, prefetched over in-loop.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

STEPS = 12
ROUNDS = 3


def main() -> None:
    import argparse

    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.data import builtin
    from clustertune.data.loader import Position, StreamBatches
    from clustertune.data.stream import BlockStream
    from clustertune.models.tokenizer import train_bpe

    ap = argparse.ArgumentParser()
    ap.add_argument("--step", choices=("device", "model"), default="device")
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    a = ap.parse_args()
    paras = builtin.pydoc_paragraphs()
    tok = train_bpe(paras, 4096, classification=False, model_max_length=128)
    texts = paras * 12  # enough text that no round reaches its end
    stream = BlockStream(lambda: iter(texts), tok, 128, chunk_texts=50)
    cpu = torch.device("cpu")
    n_steps = 3 if a.smoke else STEPS if a.step == "model" else 60

    def feed(prefetch: int, start: int):
        it = StreamBatches(stream, 16, 1, 0, 1).iterate(Position(0, start, start, None), cpu, prefetch=prefetch)
        next(it)  # the replay up to ``start`` and the pre-token cache: not the steady state
        return it

    # What tokenizing and packing one step's blocks costs here, in the loop.
    it = feed(0, 0)
    t0 = time.perf_counter()
    for _ in range(n_steps):
        next(it)
    tok_s = (time.perf_counter() - t0) / n_steps
    it.close()
    if a.step == "model":
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=4, n_positions=128,
                                           vocab_size=len(tok), bos_token_id=0, eos_token_id=0))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(batch: dict) -> None:
            model(**batch).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    else:
        def step(batch: dict) -> None:
            time.sleep(tok_s)  # the host waiting for the device

    def steps_per_s(prefetch: int, start: int) -> float:
        # Each round starts further into the text, so neither side reads text the other cached.
        it = feed(prefetch, start)
        t0 = time.perf_counter()
        for _ in range(n_steps):
            (batch,), _ = next(it)
            step(batch)
        took = time.perf_counter() - t0
        it.close()
        return n_steps / took

    print(f"tokenizing one step's blocks (16 x 128) in the loop: {tok_s * 1e3:.1f} ms; step: {a.step}")
    inline, ahead = [], []
    rounds = 1 if a.smoke else ROUNDS
    for r in range(rounds):
        inline.append(steps_per_s(0, 16 * (n_steps + 1) * (2 * r + 1)))
        ahead.append(steps_per_s(2, 16 * (n_steps + 1) * (2 * r + 2)))
        print(f"round {r}: in-loop {inline[-1]:.2f} steps/s, prefetched {ahead[-1]:.2f} steps/s", flush=True)
    x, y = sum(inline) / rounds, sum(ahead) / rounds
    print(f"threads {torch.get_num_threads()}; in-loop {x:.2f} steps/s, prefetched {y:.2f} steps/s")
    print(f"ratio={y / x:.2f}")


if __name__ == "__main__":
    main()
