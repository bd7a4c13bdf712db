"""Starter recipes for ``clustertune init``: a few chosen keys per task, each with the first
sentence of its schema doc as a comment, and some common keys left commented out to uncomment.
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from typing import Any

import yaml

from clustertune.errors import StarterError
from clustertune.fsutil import atomic_write_text
from clustertune.recipe.keys import KeyDoc, all_keys

# A key the starter sets, or (with a leading "#") one it shows commented out.
Entry = tuple[str, Any]

_RUN_LOCAL = [("backend", "local"), ("#procs_per_node", 2)]
# The RL starters tune the quickstart model, offline like the others; a hub model is the alternative.
_QUICKSTART_POLICY: Entry = ("policy", "run:quickstart")
_HUB_POLICY: Entry = ("#policy", "HuggingFaceTB/SmolLM2-135M-Instruct")

STARTERS: dict[str, tuple[str, list[tuple[str, list[Entry]]]]] = {
    "causal_lm": (
        "A small GPT-2-style language model trained from scratch on Python's reference documentation\n"
        "(offline, a few minutes on a CPU). Swap in your own model and text when it runs.",
        [("", [("description", "GPT-2-style LM from scratch on the builtin pydoc corpus"), ("task", "causal_lm")]),
         ("model", [("config", "gpt2"), ("config_overrides", {"n_layer": 4, "n_embd": 256, "n_head": 4, "n_positions": 128}),
                    ("tokenizer", "train"), ("tokenizer_vocab_size", 4096), ("#name_or_path", "gpt2")]),
         ("data", [("dataset", "builtin:pydoc"), ("block_size", 128), ("#train_files", ["train.txt"])]),
         ("train", [("batch_size", 16), ("lr", 1.0e-3), ("warmup_steps", 10), ("lr_scheduler", "cosine"),
                    ("max_steps", 200), ("eval_every", 50), ("save_every", 50), ("#gradient_accumulation_steps", 1),
                    ("#precision", "auto")]),
         ("launch", _RUN_LOCAL)]),
    "sequence_classification": (
        "A small BERT-style classifier trained from scratch to tell prose from code in the lines of\n"
        "Python's reference documentation (2 classes; offline, CPU). Point data at your own labelled\n"
        "files.",
        [("", [("description", "BERT-style classifier telling prose from code in builtin pydoc lines (2 classes)"),
               ("task", "sequence_classification")]),
         ("model", [("config", "bert"), ("config_overrides", {"num_hidden_layers": 2, "hidden_size": 128,
                                                              "num_attention_heads": 2, "intermediate_size": 256}),
                    ("tokenizer", "train"), ("tokenizer_vocab_size", 2048), ("num_labels", 2),
                    ("#name_or_path", "bert-base-cased")]),
         ("data", [("dataset", "builtin:pydoc-kinds"), ("max_length", 64), ("#train_files", ["train.csv"]),
                   ("#text_column", "text"), ("#label_column", "label")]),
         ("train", [("batch_size", 16), ("lr", 2.0e-3), ("max_steps", 100), ("eval_every", 25)]),
         ("launch", _RUN_LOCAL)]),
    "sft": (
        "Instruction tuning, offline on a CPU: the quickstart model (trained first when there is no\n"
        "quickstart run yet) learns to name the topic of a passage of Python's documentation. Every\n"
        "weight trains, which suits a model this small. For a pretrained chat model, set\n"
        "model.name_or_path to its hub name (downloaded once) and uncomment the LoRA adapter.",
        [("", [("description", "SFT of the quickstart model on builtin pydoc topics"), ("task", "sft")]),
         ("model", [("name_or_path", "run:quickstart"), ("#name_or_path", "HuggingFaceTB/SmolLM2-135M-Instruct"),
                    ("#adapter", {"type": "lora", "rank": 16, "alpha": 32})]),
         ("data", [("dataset", "builtin:pydoc-topics"), ("max_length", 128),
                   ("sft", {"chat_template": "chatml", "packing": True}), ("#train_files", ["chats.jsonl"])]),
         ("train", [("batch_size", 16), ("lr", 1.0e-3), ("warmup_steps", 10), ("lr_scheduler", "cosine"),
                    ("max_steps", 250), ("eval_every", 50), ("#gradient_accumulation_steps", 2)]),
         ("launch", _RUN_LOCAL)]),
    "reward_model": (
        "A reward model, offline on a CPU: the quickstart model (trained first when there is no\n"
        "quickstart run yet) with a one-score head, trained on preference pairs (a prompt, the answer\n"
        "to prefer, the one to avoid; here pairs made from Python's documentation) so that the\n"
        "preferred answer scores higher. Evaluations report how often it does on held-out pairs. Use\n"
        "the run as a GRPO reward: rl.rewards: [{model: run:<this run>}]. Put your own pairs in a JSONL\n"
        "file with prompt/chosen/rejected fields (data.train_files).",
        [("", [("description", "Reward model from the quickstart model on builtin preference pairs"),
               ("task", "reward_model")]),
         ("model", [("name_or_path", "run:quickstart"), ("#name_or_path", "HuggingFaceTB/SmolLM2-135M-Instruct")]),
         ("data", [("dataset", "builtin:pydoc-preferences"), ("max_length", 64), ("validation_fraction", 0.1),
                   ("max_eval_samples", 200), ("#train_files", ["pairs.jsonl"]), ("#chosen_column", "chosen"),
                   ("#rejected_column", "rejected")]),
         ("train", [("batch_size", 16), ("lr", 1.0e-3), ("max_steps", 100), ("eval_every", 50),
                    ("eval_at_start", True), ("save_every", 50)]),
         ("launch", _RUN_LOCAL)]),
    "rlhf": (
        "GRPO, offline on a CPU: the quickstart model (trained first when there is no quickstart run\n"
        "yet) tuned against a reward function (here: the share of letters 'e' in its completions;\n"
        "write your own as module:function). For a pretrained chat model, set rl.policy to its hub\n"
        "name (downloaded once) and train.lr near 1e-5.",
        [("", [("description", "GRPO of the quickstart model against a reward function"), ("task", "rlhf")]),
         ("data", [("dataset", "builtin:pydoc-prompts"), ("max_eval_samples", 128)]),
         ("rl", [("algorithm", "grpo"), _QUICKSTART_POLICY, _HUB_POLICY,
                 ("rewards", [{"function": "clustertune.rewards:char_fraction", "kwargs": {"chars": "e"}}]),
                 ("num_generations", 4), ("max_new_tokens", 16)]),
         ("train", [("batch_size", 16), ("lr", 1.0e-3), ("lr_scheduler", "constant"), ("max_steps", 40),
                    ("save_every", 20)]),
         ("launch", _RUN_LOCAL)]),
    "dpo": (
        "DPO, offline on a CPU: the quickstart model (trained first when there is no quickstart run\n"
        "yet) tuned on preference pairs (a prompt, the answer to prefer, the one to avoid), here pairs\n"
        "made from Python's documentation. Put your own pairs in a JSONL file with\n"
        "prompt/chosen/rejected fields (data.train_files). For a pretrained chat model, set rl.policy\n"
        "to its hub name (downloaded once) and train.lr near 5e-6.",
        [("", [("description", "DPO of the quickstart model on builtin preference pairs"), ("task", "rlhf")]),
         ("data", [("dataset", "builtin:pydoc-preferences"), ("validation_fraction", 0.1),
                   ("#train_files", ["pairs.jsonl"])]),
         ("rl", [("algorithm", "dpo"), _QUICKSTART_POLICY, _HUB_POLICY, ("beta", 0.1),
                 ("max_prompt_tokens", 32)]),
         ("train", [("batch_size", 16), ("lr", 6.0e-3), ("lr_scheduler", "constant"), ("max_steps", 120),
                    ("save_every", 60)]),
         ("launch", _RUN_LOCAL)]),
    "kto": (
        "KTO, offline on a CPU: the quickstart model (trained first when there is no quickstart run\n"
        "yet) tuned on answers marked desirable or not (thumbs up or down), one a row: a JSONL file\n"
        "with prompt/completion/label fields (label true or false). Preference pairs work too (here\n"
        "the builtin ones): each is split into one of each. For a pretrained chat model, set\n"
        "rl.policy to its hub name (downloaded once) and train.lr near 5e-6.",
        [("", [("description", "KTO of the quickstart model on builtin preference pairs"), ("task", "rlhf")]),
         ("data", [("dataset", "builtin:pydoc-preferences"), ("validation_fraction", 0.1),
                   ("#train_files", ["thumbs.jsonl"])]),
         ("rl", [("algorithm", "kto"), _QUICKSTART_POLICY, _HUB_POLICY, ("beta", 0.1),
                 ("#desirable_weight", 1.0), ("max_prompt_tokens", 32)]),
         ("train", [("batch_size", 8), ("lr", 2.0e-3), ("max_steps", 40), ("save_every", 20)]),
         ("launch", _RUN_LOCAL)]),
}

TASK_ALIASES = {"classification": "sequence_classification", "lm": "causal_lm", "grpo": "rlhf", "rm": "reward_model"}


def starter_tasks() -> list[str]:
    return [*STARTERS, *TASK_ALIASES]


def _first_sentence(doc: str) -> str:
    end = re.search(r"(?<!e\.g)(?<!i\.e)\. ", doc)
    return doc if end is None else doc[: end.start() + 1]


def _comment(text: str, indent: str) -> list[str]:
    return [f"{indent}# {line}" for line in textwrap.wrap(text, 94 - len(indent), break_on_hyphens=False)]


def _yaml_lines(key: str, value: Any) -> list[str]:
    """``key: value``: scalars plain, mappings and lists of scalars in flow style on the same
    line, a list of mappings as a block below the key."""
    if not isinstance(value, (dict, list)):
        return yaml.safe_dump({key: value}, default_flow_style=False, width=1000).rstrip("\n").splitlines()
    lines = yaml.safe_dump(value, sort_keys=False, default_flow_style=None, width=1000).rstrip("\n").splitlines()
    if len(lines) == 1:
        return [f"{key}: {lines[0]}"]
    return [f"{key}:", *(f"  {line}" for line in lines)]


def starter_text(task: str) -> str:
    """The commented starter recipe of a task (``classification`` names sequence_classification)."""
    task = TASK_ALIASES.get(task, task)
    if task not in STARTERS:
        raise StarterError(f"init: no starter for task {task!r}; choose one of {', '.join(starter_tasks())}")
    header, sections = STARTERS[task]
    docs: dict[str, KeyDoc] = {d.key: d for d in all_keys()}
    out = [f"# {line}" if line else "#" for line in header.splitlines()]
    out += ["#", "# Every key with its type, default and doc: `clustertune schema` (one key: `clustertune schema",
            "# train.lr`). Check this file: `clustertune validate FILE`; run it: `clustertune run FILE`.",
            "# The recipe's name (used in run ids) defaults to the file name. Completion in editors",
            "# (YAML language server): `clustertune schema --json-schema > recipe.schema.json`, then",
            "# put the comment `yaml-language-server: $schema=recipe.schema.json` on this file's first line."]
    for section, entries in sections:
        indent = "  " if section else ""
        out.append("")
        if section:
            out += _comment(_first_sentence(docs[section].doc), "")
            out.append(f"{section}:")
        documented: set[str] = set()
        for raw_key, value in entries:
            commented = raw_key.startswith("#")
            key = raw_key.lstrip("#")
            if key not in documented:  # an alternative value right below shares its key's comment
                documented.add(key)
                out += _comment(_first_sentence(docs[f"{section}.{key}" if section else key].doc), indent)
            out += [f"{indent}{'# ' if commented else ''}{line}" for line in _yaml_lines(key, value)]
    return "\n".join(out) + "\n"


def write_starter(task: str, path: str | os.PathLike[str], force: bool = False) -> Path:
    """Write the starter recipe; an existing file is kept unless ``force``. A directory gets
    ``recipe.yaml`` inside it."""
    target = Path(path).expanduser()
    if target.is_dir():
        target = target / "recipe.yaml"
    text = starter_text(task)
    if target.exists() and not force:
        raise StarterError(f"init: {target} already exists; choose another path or pass --force to overwrite it")
    if target.suffix not in (".yaml", ".yml"):
        raise StarterError(f"init: {target} should end in .yaml (recipes are YAML files)")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    return target
