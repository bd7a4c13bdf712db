"""Run exported GGUF files with llama.cpp and compare them with transformers (by hand).

`clustertune export --format gguf` reads every file back and compares tensors and tokenizer;
this goes one step further and runs the file: llama.cpp (through llama-cpp-python, built once
from its pinned source distribution into ~/.cache/clustertune/llama-cpp-python-0.3.36, several
minutes on two cores) and transformers both tokenize a set of prompts and continue them greedily on the CPU.

Reported per model: prompts whose token ids are equal (the tokenizer mapping), prompts whose
greedy continuation is equal token for token, and the share of generated tokens that agree
(position by position, up to the first difference counted as the rest disagreeing) for f16
and q8_0.

    .venv/bin/python benchmarks/gguf_check.py RUN_OR_MODEL_DIR [RUN_OR_MODEL_DIR ...] \\
        [--runs-root runs] [--tokens 24]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PIN = "llama-cpp-python==0.3.36"
TARGET = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clustertune" / PIN.replace("==", "-")

PROMPTS = [
    "The for statement",
    "A function definition defines",
    "Exceptions are raised when",
    "The import statement",
    "class Foo:\n    def __init__(self):",
    "Strings are immutable sequences of",
    "The with statement is used to",
    "Lists are mutable sequences, typically used to",
    "In a generator function, the yield expression",
    "If the syntax **expression appears in the function call,",
]
CHATS = [
    [{"role": "user", "content": "What does def define?"}],
    [{"role": "user", "content": "Which keyword starts a loop?"}],
    [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "What is None?"}],
    [{"role": "user", "content": "After 7?"}],
]


def build_llama_cpp() -> None:
    """Build llama-cpp-python once (CPU, from source) into TARGET; reused after."""
    if (TARGET / "llama_cpp").is_dir():
        return
    print(f"building {PIN} into {TARGET} (several minutes on two cores) ...", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-binary", "llama-cpp-python",
                    "--target", str(TARGET), PIN, "diskcache>=5.6"], check=True)  # its one dependency not here


def greedy_hf(model, ids: list[int], n: int, eos: set[int]) -> list[int]:  # type: ignore[no-untyped-def]
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                             eos_token_id=sorted(eos) or None, pad_token_id=sorted(eos)[0] if eos else 0)
    return out[0, len(ids):].tolist()


def greedy_llama(llm, ids: list[int], n: int, eos: set[int]) -> list[int]:  # type: ignore[no-untyped-def]
    llm.reset()
    got: list[int] = []
    for t in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        got.append(int(t))
        if t in eos or len(got) == n:
            break
    return got


def agreement(a: list[int], b: list[int]) -> tuple[int, int]:
    """Tokens equal up to the first difference, out of the longer continuation."""
    same = 0
    for x, y in zip(a, b):
        if x != y:
            break
        same += 1
    return same, max(len(a), len(b))


def check(ref: str, runs_root: str | None, n_tokens: int) -> list[str]:
    sys.path.insert(0, str(TARGET))
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from clustertune.use.gguf_export import export_gguf

    rows = []
    with tempfile.TemporaryDirectory(prefix="gguf-check-") as tmp:
        for quant in ("f16", "q8_0"):
            done = export_gguf(ref, Path(tmp) / quant, runs_root=runs_root, quant=quant)
            # The file's own source: the merged model the export converted, rebuilt here.
            if quant == "f16":
                from clustertune.use.export import export_model

                hf_dir = export_model(ref, Path(tmp) / "hf", runs_root=runs_root, merge=True).path
                tok = AutoTokenizer.from_pretrained(str(hf_dir))
                model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype="float32").eval()
                eos = {tok.eos_token_id} | ({tok.convert_tokens_to_ids("<|im_end|>")} if "<|im_end|>" in tok.get_vocab() else set())
                texts = list(PROMPTS)
                if tok.chat_template:
                    texts += [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in CHATS]
                prompts = [tok(t, add_special_tokens=True)["input_ids"] for t in texts]
                want = [greedy_hf(model, ids, n_tokens, eos) for ids in prompts]
            llm = Llama(model_path=str(done.gguf), n_ctx=0, n_threads=2, verbose=False, logits_all=False)
            same_ids = sum(llm.tokenize(t.encode(), add_bos=False, special=True) == ids for t, ids in zip(texts, prompts))
            got = [greedy_llama(llm, ids, n_tokens, eos) for ids in prompts]
            exact = sum(g == w for g, w in zip(got, want))
            agree = [agreement(g, w) for g, w in zip(got, want)]
            rate = sum(a for a, _ in agree) / max(1, sum(b for _, b in agree))
            rows.append(f"| {ref} | {quant} | {same_ids}/{len(texts)} | {exact}/{len(texts)} | {rate:.1%} |")
            del llm
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("refs", nargs="+", help="run ids or model directories")
    p.add_argument("--runs-root", default=None)
    p.add_argument("--tokens", type=int, default=24, help="greedy tokens per prompt")
    args = p.parse_args()
    build_llama_cpp()
    print("| model | quant | prompt ids equal | greedy continuations equal | generated tokens agreeing |")
    print("|---|---|---|---|---|")
    for ref in args.refs:
        for row in check(ref, args.runs_root, args.tokens):
            print(row, flush=True)


if __name__ == "__main__":
    main()
