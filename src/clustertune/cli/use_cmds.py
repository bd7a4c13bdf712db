"""``generate`` and ``chat``: use what a run trained."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import typer

from clustertune.cli.completion import complete_model

from clustertune.errors import GenerationError
from clustertune.use.chat import ChatSession, chat_loop, require_chat_template
from clustertune.fsutil import atomic_write_text
from clustertune.use.generate import seed as seed_once
from clustertune.use.generate import read_prompts_file, row_prompt
from clustertune.use.load import find_target, load_for_use
from clustertune.use.generate import Generator, refuse_classifier, resolve_chat_template
from clustertune.use.generate import Sampling

Model = typer.Argument(..., help="Run id (or a unique prefix) or a model directory (save_pretrained or an adapter).",
                       autocompletion=complete_model)
Temperature = typer.Option(0.7, "--temperature", help="Sampling temperature; 0 is greedy.")
TopP = typer.Option(0.95, "--top-p", help="Nucleus sampling: keep the most likely tokens up to this probability.")
TopK = typer.Option(50, "--top-k", help="Keep only the K most likely tokens; 0 keeps all.")
MaxNew = typer.Option(256, "--max-new-tokens", help="Longest answer in tokens (less if the context is full).")
Seed = typer.Option(None, "--seed", help="Seed sampling: the same seed gives the same text on this machine.")
Template = typer.Option(None, "--template", help="Chat template for a tokenizer without one (or to replace it): "
                        "chatml, llama3 or a Jinja file.")
Device = typer.Option(None, "--device", help="cpu, cuda or cuda:N (default: a GPU where there is one).")
Dtype = typer.Option("auto", "--dtype", help="auto (bf16 on a GPU that has it, else fp32), fp32, bf16 or fp16.")
RunsRoot = typer.Option(None, "--runs-root", help="Where run directories live (default $CLUSTERTUNE_RUNS or ./runs).")


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _sampling(temperature: float, top_p: float, top_k: int, max_new_tokens: int, seed: Optional[int]) -> Any:
    return Sampling(temperature, top_p, top_k, max_new_tokens, seed).check()


def quiet_loading() -> None:
    """Nothing but the answers on the terminal: no loading bar, and not bitsandbytes' notice (on
    import, where it is installed) that an optional CPU kernel package is missing."""
    import logging

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)


def _generator(model: str, runs_root: Optional[Path], device: Optional[str], dtype: str, template: Optional[str],
               raw: bool) -> Any:
    refuse_classifier(find_target(model, runs_root))  # before its weights are read
    quiet_loading()
    if template and not raw:
        resolve_chat_template(template, None)  # a wrong name is refused before the model loads
    return Generator(load_for_use(model, runs_root=runs_root, device=device, dtype=dtype), template, raw)


def generate(
    model: str = Model,
    prompts: Optional[list[str]] = typer.Argument(None, help="Prompts, each answered in turn."),
    input_file: Optional[Path] = typer.Option(None, "--input", help="JSONL of {\"prompt\": ...} or {\"messages\": [...]} rows."),
    output: Optional[Path] = typer.Option(None, "--output", help="Write JSONL rows (the input's fields + \"completion\") here."),
    temperature: float = Temperature,
    top_p: float = TopP,
    top_k: int = TopK,
    max_new_tokens: int = MaxNew,
    seed: Optional[int] = Seed,
    raw: bool = typer.Option(False, "--raw", help="Send prompts as they are, without the chat template."),
    template: Optional[str] = Template,
    batch_size: int = typer.Option(8, "--batch-size", help="Prompts per generate call with --input/--output."),
    device: Optional[str] = Device,
    dtype: str = Dtype,
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Answer prompts with a trained causal LM; chat-tuned models get their chat template."""

    if bool(prompts) == (input_file is not None):
        raise GenerationError("give prompts as arguments or a prompts file with --input FILE.jsonl (one of the two)")
    sampling = _sampling(temperature, top_p, top_k, max_new_tokens, seed)
    if batch_size < 1:
        raise GenerationError(f"--batch-size {batch_size}: use a positive count")
    rows = read_prompts_file(input_file) if input_file is not None else [{"prompt": p} for p in prompts or []]
    if output is not None and output.parent and not output.parent.is_dir():
        raise GenerationError(f"--output {output}: its directory {output.parent} does not exist")
    if output is not None and output.is_dir():  # found before generating, not when writing the answers
        raise GenerationError(f"--output {output}: a directory is there; name a file, e.g. {output / 'completions.jsonl'}")
    gen = _generator(model, runs_root, device, dtype, template, raw)
    items = [row_prompt(r) for r in rows]
    if input_file is None and output is None:  # a person reading: answers stream as they come
        seed_once(sampling.seed)
        for i, item in enumerate(items):
            if len(items) > 1:
                _write(f"{'' if i == 0 else chr(10)}== {i + 1}: {item}\n")
            gen.complete([item], replace(sampling, seed=None), write=_write)
            _write("\n")
        return
    answers = gen.complete(items, sampling, batch_size=batch_size)
    lines = "".join(json.dumps({**r, "completion": a}, ensure_ascii=False) + "\n" for r, a in zip(rows, answers))
    if output is None:
        _write(lines)
        return

    atomic_write_text(output, lines)
    print(f"wrote {len(rows)} completion{'s' if len(rows) != 1 else ''} to {output}", file=sys.stderr)


def chat(
    model: str = Model,
    system: Optional[str] = typer.Option(None, "--system", help="System prompt at the start of the conversation."),
    temperature: float = Temperature,
    top_p: float = TopP,
    top_k: int = TopK,
    max_new_tokens: int = MaxNew,
    seed: Optional[int] = Seed,
    template: Optional[str] = Template,
    device: Optional[str] = Device,
    dtype: str = Dtype,
    runs_root: Optional[Path] = RunsRoot,
) -> None:
    """Talk with a chat model in the terminal: /reset clears the conversation, /exit or Ctrl-D leaves."""

    sampling = _sampling(temperature, top_p, top_k, max_new_tokens, seed)
    gen = _generator(model, runs_root, device, dtype, template, raw=False)
    require_chat_template(gen)
    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401  (line editing and history for input())
        except ImportError:
            pass
    raise typer.Exit(chat_loop(ChatSession(gen, sampling, system), write=_write))
