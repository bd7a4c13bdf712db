"""The model card (README.md) of an exported model: what it is, how it was trained, how it
scored, how to load it. Hub metadata goes in its YAML header.

Local paths never appear in full (a card is often pushed where others read it): a local base
model or data file is named by its last path component.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from clustertune.tasks import find_task
from clustertune.runs.paths import RunPaths
from clustertune.use.load import Target, adapter_base
from clustertune.recipe import load_recipe
from clustertune.errors import UserError

_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_KINDS = {"model": "a full model", "adapter": "a PEFT adapter, loaded onto its base",
          "merged model": "a full model: the adapter merged into its base"}


def _is_hub_name(ref: str) -> bool:
    return bool(_HUB_NAME.match(ref)) and not Path(ref).expanduser().exists()


def _shown(ref: str) -> str:
    """A hub name as it is; another run's final model by that run's id; a local path by its
    last component."""
    if _is_hub_name(ref):
        return ref
    p = Path(ref)
    run = RunPaths(p.parent)
    if p.name == run.model.name and run.run_json.is_file():  # `model.name_or_path: run:<run>`, resolved
        return f"the model of run `{run.run_id}`"
    return f"a local model ({p.name or ref})"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _recipe(target: Target) -> Any:
    """The run's resolved recipe, typed; None for a plain directory or a recipe this version
    of clustertune no longer reads (the card then says less)."""
    if target.run is None or not target.run.paths.recipe.is_file():
        return None

    try:
        return load_recipe(target.run.paths.recipe)
    except UserError:
        return None


def _base(target: Target, recipe: Any) -> str | None:
    """The pretrained model it started from (hub name or local path), None if built from a config."""
    if target.adapter and target.step is None:  # a checkpoint holds no adapter_config.json: its recipe names the base
        return adapter_base(target.path)
    if recipe is not None:
        return recipe.model.name_or_path
    return None


def _number(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _training_lines(recipe: Any) -> list[str]:
    m, d, t = recipe.model, recipe.data, recipe.train
    task = find_task(recipe.task)
    lines = [f"- recipe `{recipe.name}`, task `{recipe.task}` ({task.summary if task else recipe.task})"]
    if m.name_or_path:
        lines.append(f"- started from {_shown(m.name_or_path)}")
    elif m.config:
        overrides = ", ".join(f"{k}={v}" for k, v in m.config_overrides.items())
        lines.append(f"- built from the `{Path(m.config).name}` config" + (f" ({overrides})" if overrides else "")
                     + ", weights initialised at random")
    if m.adapter is not None:
        a = m.adapter
        targets = a.target_modules if isinstance(a.target_modules, str) else ", ".join(a.target_modules)
        lines.append(f"- adapter: {a.type}, rank {a.rank}, alpha {_number(a.alpha)}, on {targets}")
    if d.dataset:
        data = d.dataset if d.dataset.startswith("builtin:") or _is_hub_name(d.dataset) else Path(d.dataset).name
        lines.append(f"- data: `{data}`")
    elif d.train_files:
        lines.append("- data: " + ", ".join(f"`{Path(f).name}`" for f in d.train_files))
    length = f"{recipe.sequence_key.removeprefix('data.').replace('_', ' ')} {recipe.sequence_length}"
    steps = f"{t.max_steps} steps" if t.max_steps else f"{_number(t.epochs)} epochs"
    lines.append(f"- {steps}, batch size {t.batch_size} x {t.gradient_accumulation_steps} accumulation, {length}, "
                 f"lr {_number(t.lr)} ({t.lr_scheduler}), precision {t.precision}, seed {t.seed}")
    if recipe.traits.templated and d.sft.chat_template:
        lines.append(f"- chat template: `{Path(d.sft.chat_template).name}`")
    return lines


def _results_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    final = summary.get("final_eval")
    if isinstance(final, dict) and final:
        figures = ", ".join(f"{k} {_number(v)}" for k, v in final.items() if isinstance(v, (int, float)))
        if figures:
            lines.append(f"- final evaluation: {figures}")
    facts = [(summary.get("steps"), "{} steps"), (summary.get("train_seconds"), "{:.3g} s of training"),
             (summary.get("tokens_per_s"), "{:.0f} tokens/s")]
    done = ", ".join(fmt.format(v) for v, fmt in facts if isinstance(v, (int, float)))
    if done:
        lines.append(f"- {done}")
    return lines


def _base_ref(base: str | None) -> str:
    """The base as the card's example names it: a hub name, or a placeholder for a local copy."""
    if base and _is_hub_name(base):
        return json.dumps(base) + ")"
    return json.dumps(f"path/to/{Path(base).name if base else 'base-model'}") + ")  # your copy of the base model"


def _usage(kind: str, classifier: bool, load_from: str, base: str | None, chat: bool) -> str:
    if kind == "adapter":
        auto = "AutoModelForSequenceClassification" if classifier else "AutoModelForCausalLM"
        return (
            "```python\n"
            "from peft import PeftModel\n"
            f"from transformers import AutoTokenizer, {auto}\n\n"
            f"base = {auto}.from_pretrained({_base_ref(base)}\n"
            f"model = PeftModel.from_pretrained(base, {json.dumps(load_from)})\n"
            f"tokenizer = AutoTokenizer.from_pretrained({json.dumps(load_from)})\n"
            "```\n\n"
            "`model.merge_and_unload()` gives a plain model (or export with `--merge`).\n"
        )
    if classifier:
        return (
            "```python\n"
            "from transformers import pipeline\n\n"
            f"classify = pipeline(\"text-classification\", model={json.dumps(load_from)})\n"
            "print(classify(\"some text\"))  # [{'label': ..., 'score': ...}]\n"
            "```\n"
        )
    prompt = ('[{"role": "user", "content": "Hello!"}]' if chat else '"def main():"')
    return (
        "```python\n"
        "from transformers import pipeline\n\n"
        f"generate = pipeline(\"text-generation\", model={json.dumps(load_from)})\n"
        f"print(generate({prompt}, max_new_tokens=64)[0][\"generated_text\"])\n"
        "```\n"
    )


def model_card(target: Target, out: Path, *, kind: str, dtype: str, load_from: str, fidelity: Any = None) -> str:
    """README.md for the export of ``target`` written to ``out`` (``kind``: model, adapter or
    merged model; ``fidelity``: what the check against the trained model found, if it ran)."""
    recipe = _recipe(target)
    base = _base(target, recipe)
    summary = _read_json(target.run.paths.summary) if target.run is not None else {}
    task = recipe.task if recipe is not None else ("sequence_classification" if target.classifier else "causal_lm")

    meta: dict[str, Any] = {"library_name": "peft" if kind == "adapter" else "transformers",
                            "pipeline_tag": "text-classification" if target.classifier else "text-generation",
                            "tags": ["clustertune", task] + ([kind.replace(" ", "-")] if kind != "model" else [])}
    if base and _is_hub_name(base):
        meta["base_model"] = base
    name = (recipe.name if recipe is not None else None) or Path(load_from).name

    origin = f", fine-tuned from {_shown(base)}" if base else ""
    parts = [
        "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n",
        f"# {name}\n",
        f"{(found.model_noun if (found := find_task(task)) else 'A model')}{origin}, trained with clustertune"
        + (f" (run `{target.run.id}`)" if target.run is not None else "")
        + f". Exported as {_KINDS[kind]}; weights in {dtype}.\n",
    ]
    if recipe is not None:
        parts.append("## Training\n\n" + "\n".join(_training_lines(recipe)) + "\n")
    results = _results_lines(summary)
    if results:
        parts.append("## Results\n\n" + "\n".join(results) + "\n")
    labels = _labels(out) if target.classifier else None
    if labels:
        parts.append("## Labels\n\n" + ", ".join(f"{i} = `{n}`" for i, n in labels) + "\n")
    if fidelity is not None:
        parts.append("## Checked against the trained model\n\n" + _fidelity_lines(fidelity) + "\n")
    parts.append("## How to load it\n\n" + _usage(kind, target.classifier, load_from, base,
                                                             (out / "chat_template.jinja").is_file()))
    return "\n".join(parts)


def _labels(out: Path) -> list[tuple[int, str]]:
    id2label = _read_json(out / "config.json").get("id2label") or {}
    try:
        return sorted((int(k), str(v)) for k, v in id2label.items())
    except (TypeError, ValueError):
        return []


def _fidelity_lines(found: Any) -> str:
    lines = [f"This export, loaded back with transformers, was run on {found.prompts} held-out prompts "
             f"({found.source}) beside the trained model, before it was written:", ""]
    if found.templates_equal is not None:
        lines.append(f"- the chat template renders {found.templates_equal} of {found.prompts} prompts identically")
    lines += [f"- the tokenizer splits {found.tokens_equal} of {found.prompts} prompts identically",
              f"- greedy agreement with the trained model's answers: {found.agreement:.3f} "
              f"(the check asks for at least {found.threshold})",
              f"- mean log-probability difference of those answers: {found.logprob_gap:.2e} a token"]
    return "\n".join(lines)
