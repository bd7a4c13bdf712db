"""The generation check of SFT runs: greedy answers to held-out prompts against their references.

Every rank answers a strided share of the prompts (the same number of ``generate`` calls on every
rank, with ``synced_gpus`` beyond one process, so sharded models stay in step) and the counts are
summed across ranks. An answer ends at the template's end-of-turn marker (or the end-of-text
token); it scores an exact match when it equals the reference (surrounding whitespace aside) and
"contains" when the reference appears in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from clustertune.tasks import task_of


def cut_answer(text: str, stops: list[str]) -> str:
    """The generated text up to the first stop string, without surrounding whitespace. A stop
    string begun but cut off by ``max_new_tokens`` at the very end (``answer<|im``) counts too:
    markers spelled in plain-text tokens take several tokens."""
    end = len(text)
    for s in stops:
        if s and (k := text.find(s)) >= 0:
            end = min(end, k)
        elif s:
            partial = next((n for n in range(len(s) - 1, 0, -1) if text.endswith(s[:n])), 0)
            end = min(end, len(text) - partial)
    return text[:end].strip()


def score(answers: list[str], references: list[str]) -> dict[str, float]:
    n = max(1, len(references))
    return {"eval_exact_match": sum(a == r for a, r in zip(answers, references)) / n,
            "eval_contains": sum(r in a for a, r in zip(answers, references)) / n}


def _single_token(tokenizer: Any, text: str) -> int | None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
    return int(ids[0]) if len(ids) == 1 else None


@torch.no_grad()
def generation_check(model: torch.nn.Module, arrays: Any, tokenizer: Any, strategy: Any,
                     max_new_tokens: int) -> dict[str, float]:
    """Exact-match and contains-the-reference rates over ``arrays.generation`` (all ranks)."""
    prompts = arrays.generation
    rank, world, dev = strategy.process_index, strategy.num_processes, strategy.device
    mine = list(range(rank, len(prompts), world))
    rounds = -(-len(prompts) // world)
    stops = [arrays.end_marker, tokenizer.eos_token or ""]
    eos = [t for t in (_single_token(tokenizer, arrays.end_marker), tokenizer.eos_token_id) if t is not None]
    net = strategy.unwrap(model)
    was_training = net.training
    net.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=dev)  # exact, contains, n
    for k in range(rounds):
        i = mine[k] if k < len(mine) else None  # ranks with fewer prompts repeat one, uncounted
        p = prompts[i if i is not None else mine[0] if mine else 0]
        ids = torch.tensor([p["prompt_ids"]], dtype=torch.long, device=dev)
        with strategy.autocast():
            out = net.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                               do_sample=False, eos_token_id=eos or None, synced_gpus=world > 1,
                               pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        if i is None:
            continue
        answer = cut_answer(tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=False), stops)
        s = score([answer], [p["reference"]])
        sums += torch.tensor([s["eval_exact_match"], s["eval_contains"], 1.0], dtype=torch.float64, device=dev)
    sums = strategy.reduce(sums, reduction="sum")
    if was_training:
        net.train()
    n = max(sums[2].item(), 1.0)
    return {"eval_exact_match": sums[0].item() / n, "eval_contains": sums[1].item() / n}


def make_generation_check(recipe: Any, eval_arrays: Any, tokenizer_dir: Any,
                          strategy: Any) -> Callable[[torch.nn.Module], dict[str, float]] | None:
    """The check for this run, or None when it has no held-out prompts (other tasks, or
    ``data.sft.generation_samples: 0``)."""
    if not task_of(recipe.task).generation_eval or not getattr(eval_arrays, "generation", None):
        return None
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    n = recipe.data.sft.max_new_tokens
    return lambda model: generation_check(model, eval_arrays, tok, strategy, n)
