"""Preparing chat data for SFT: clustertune's ``prepare`` vs TRL's own preparation, same data.

    .venv/bin/python benchmarks/sft_prepare.py                  # 20,000 conversations, 3 rounds
    .venv/bin/python benchmarks/sft_prepare.py --n 2000 --repeats 1

The data: multi-turn ChatML conversations made from the builtin corpus (a system turn, then
two user/assistant exchanges over a paragraph's words), as a jsonl file. The tokenizer: a
byte-level BPE (4,096 tokens) trained on the corpus, with the ChatML markers as special tokens.

- clustertune: ``prepare(recipe, force=True)`` from the jsonl file and the tokenizer's
  directory to the cache directory (reading, rendering, tokenizing, loss masks, writing shards,
  the tokenizer and the manifest): everything.
- TRL 1.12: from the same jsonl file and tokenizer directory, ``AutoTokenizer.from_pretrained``
  and ``datasets.load_dataset("json", ...)`` (into a fresh cache directory each round, so it
  reads the file as clustertune does), then ``SFTTrainer._prepare_dataset`` (its own code
  path: template + tokenize through ``datasets.map``, labels, truncation, ``dataset_num_proc`` =
  the core count), with ``assistant_only_loss=True`` and a copy of the same ChatML template
  carrying ``{% generation %}`` markers around each assistant content and its end marker (TRL
  needs them to find the assistant tokens; the rendered text is the same). Its
  ``_prepare_dataset`` alone is timed and printed too.

Before timing, every example's token ids and loss mask (TRL: labels != -100) are compared:
they must be identical. The last line is ``ratio=<TRL seconds / clustertune seconds>``, of
the medians over the rounds (the machine may be shared: the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MARKED_CHATML = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\n' }}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\n' }}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def conversations(n: int) -> list[dict]:
    from clustertune.data.builtin import pydoc_paragraphs

    paras = [p.split() for p in pydoc_paragraphs() if len(p.split()) >= 24]
    rows = []
    for i in range(n):
        w = paras[i % len(paras)]
        k = 6 + i % 5
        rows.append({"messages": [
            {"role": "system", "content": "You complete passages of the Python reference."},
            {"role": "user", "content": "Continue: " + " ".join(w[:k])},
            {"role": "assistant", "content": " ".join(w[k : k + 8])},
            {"role": "user", "content": f"And then? ({i})"},
            {"role": "assistant", "content": " ".join(w[k + 8 : k + 16])},
        ]})
    return rows


def make_tokenizer(out: Path) -> Path:
    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs(), 4096, classification=False, model_max_length=4096)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.save_pretrained(out)
    return out


def ours(train: Path, tok_dir: Path, cache: Path) -> tuple[float, list, list]:
    import numpy as np

    import clustertune as ct
    from clustertune.data.cache import prepare

    recipe = ct.load_recipe({"name": "bench", "task": "sft", "model": {"name_or_path": str(tok_dir)},
                             "data": {"train_files": [str(train)], "validation_files": [str(train)],
                                      "max_length": 4096, "max_eval_samples": 1,
                                      "sft": {"chat_template": "chatml", "generation_samples": 0}}})
    t0 = time.perf_counter()
    prep = prepare(recipe, force=True, cache_dir=cache)
    secs = time.perf_counter() - t0
    tr = prep.open_split("train")
    ids = [np.asarray(tr.input_ids[i][: tr.lengths[i]]).tolist() for i in range(len(tr))]
    masks = [np.asarray(tr.loss_mask[i][: tr.lengths[i]]).tolist() for i in range(len(tr))]
    return secs, ids, masks


def trl_side(train: Path, tok_dir: Path, procs: int) -> tuple[float, float, list, list]:
    """TRL's seconds from the files to prepared data, of them in ``_prepare_dataset``, ids, masks."""
    from types import SimpleNamespace

    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    with tempfile.TemporaryDirectory() as d:
        args = SFTConfig(output_dir=d, assistant_only_loss=True, max_length=4096, dataset_num_proc=procs,
                         use_cpu=True, report_to=[])
        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(str(tok_dir))
        ds = load_dataset("json", data_files=str(train), split="train", cache_dir=str(Path(d) / "hf"))
        t1 = time.perf_counter()
        me = SimpleNamespace(_tokenizer=tok, chat_template=MARKED_CHATML, completion_only_loss=None)
        out = SFTTrainer._prepare_dataset(me, ds, tok, args, False, None, "train")
        t2 = time.perf_counter()
        ids = out["input_ids"]
        masks = [[int(x != -100) for x in lab] for lab in out["labels"]]
    return t2 - t0, t2 - t1, ids, masks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20_000, help="conversations")
    p.add_argument("--repeats", type=int, default=3, help="rounds; the medians of each side are compared")
    p.add_argument("--procs", type=int, default=len(os.sched_getaffinity(0)), help="TRL's dataset_num_proc")
    p.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    a = p.parse_args()
    if a.smoke:
        a.n, a.repeats, a.procs = 200, 1, 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = conversations(a.n)
        train = root / "chat.jsonl"
        train.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tok_dir = make_tokenizer(root / "tok")
        # Warm-up on a few rows, not timed: both sides' imports and first calls.
        small = root / "small.jsonl"
        small.write_text("".join(json.dumps(r) + "\n" for r in rows[:50]), encoding="utf-8")
        ours(small, tok_dir, root / "cache")
        trl_side(small, tok_dir, a.procs)
        mine_t, trl_t, trl_prep_t = [], [], []
        for r in range(a.repeats):
            s1, ids1, m1 = ours(train, tok_dir, root / "cache")
            s2, s2_prep, ids2, m2 = trl_side(train, tok_dir, a.procs)
            if r == 0:
                assert len(ids1) == len(ids2) == a.n, (len(ids1), len(ids2))
                bad = [i for i in range(a.n) if ids1[i] != ids2[i] or m1[i] != m2[i]]
                assert not bad, f"{len(bad)} examples differ, first {bad[0]}"
                print(f"identical token ids and loss masks on all {a.n} conversations "
                      f"({sum(map(len, ids1)):,} tokens, {sum(map(sum, m1)):,} trained)")
            mine_t.append(s1)
            trl_t.append(s2)
            trl_prep_t.append(s2_prep)
            print(f"round {r + 1}: clustertune prepare {s1:.2f}s   TRL from the files {s2:.2f}s "
                  f"(of which _prepare_dataset, num_proc={a.procs}: {s2_prep:.2f}s)   "
                  f"load average {os.getloadavg()[0]:.2f}")
        med = statistics.median
        print(f"best: clustertune {min(mine_t):.2f}s, TRL {min(trl_t):.2f}s; medians {med(mine_t):.2f}s / "
              f"{med(trl_t):.2f}s (TRL's _prepare_dataset alone: median {med(trl_prep_t):.2f}s, "
              f"{med(trl_prep_t) / med(mine_t):.2f}x clustertune)")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
        print(f"ratio={med(trl_t) / med(mine_t):.2f}")


if __name__ == "__main__":
    main()
