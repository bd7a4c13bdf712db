"""``eval``: a trained model's own metrics on any data, or lm-eval tasks; no training."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import json
from pathlib import Path
from typing import Optional

import typer

from clustertune.cli.completion import complete_model, complete_override
from clustertune.cli.use_cmds import quiet_loading

from clustertune.errors import EvalError
from clustertune.use.evaluate import evaluate_lm_eval, evaluate_metrics
from clustertune.runs.evals import format_metrics
from clustertune.fsutil import atomic_write_json


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """The figures on the terminal, not transformers' loading bar or its notices about the padded
    batches the metrics are computed on (the loss never counts a padded position); its verbosity
    is put back afterwards (a caller in the same process keeps its warnings)."""
    from transformers.utils import logging as hf_logging

    quiet_loading()
    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


def eval_(
    ref: str = typer.Argument(..., help="A run id (or unique prefix) or a model directory (save_pretrained).",
                              autocompletion=complete_model),
    overrides: Optional[list[str]] = typer.Argument(None, help="key=value overrides of the data settings, "
                                                     "e.g. data.text_column=body data.max_eval_samples=200",
                                                     autocompletion=complete_override),
    data: Optional[str] = typer.Option(None, "--data", help="What data.dataset takes (builtin:pydoc, a save_to_disk "
                                       "dir, a hub name) or a local file; default: the run's validation split."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="lm-eval tasks, comma-separated (needs the "
                                        "lm-eval extra of clustertune)."),
    include_path: Optional[str] = typer.Option(None, "--include-path", help="lm-eval: a directory of your own task YAML files."),
    limit: Optional[float] = typer.Option(None, "--limit", help="lm-eval: at most N examples per task (below 1: a fraction)."),
    num_fewshot: Optional[int] = typer.Option(None, "--num-fewshot", help="lm-eval: few-shot examples per prompt."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda, cuda:N (default: a GPU if there is one)."),
    dtype: str = typer.Option("auto", "--dtype", help="auto | fp32 | bf16 | fp16 (auto: bf16 on GPUs that have it)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Examples per forward pass."),
    output: Optional[Path] = typer.Option(None, "--output", help="Also write the result (JSON) here."),
    runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run directories live."),
) -> None:
    """Evaluate a run or model directory: its own metrics (perplexity, accuracy, exact match) on
    --data or its validation split, or lm-eval --tasks. A run's results go to its evals/."""

    lm_only = [name for name, v in (("--include-path", include_path), ("--limit", limit),
                                    ("--num-fewshot", num_fewshot)) if v is not None]
    if tasks is None and lm_only:
        raise EvalError(f"{', '.join(lm_only)} only go with --tasks (lm-eval)")
    if tasks is not None and (data is not None or overrides):
        raise EvalError("--tasks runs lm-eval's own data; --data and key=value overrides are for the model's own metrics")
    _check_options(limit, num_fewshot, batch_size, output)
    with _quiet_transformers():
        if tasks is not None:
            res = evaluate_lm_eval(ref, [t.strip() for t in tasks.split(",")], include_path=include_path, limit=limit,
                                   num_fewshot=num_fewshot, runs_root=runs_root, device=device, dtype=dtype,
                                   batch_size=batch_size)
        else:
            res = evaluate_metrics(ref, data=data, overrides=list(overrides or []), runs_root=runs_root,
                                   device=device, dtype=dtype, batch_size=batch_size)
    if output is not None:
        atomic_write_json(output, json.loads(json.dumps(res.payload, default=str)))
    print(f"{res.target.label}: {res.kind} on {res.name}")
    for key, value in res.metrics.items():
        print(f"  {key:<28} {format_metrics({key: value}).split(' ', 1)[1]}")
    where = [str(p) for p in (res.path, output) if p is not None]
    if where:
        print("written to " + ", ".join(where))


def _check_options(limit: Optional[float], num_fewshot: Optional[int], batch_size: Optional[int],
                   output: Optional[Path]) -> None:
    """The numbers and the --output path, refused before a model loads or an evaluation runs."""
    bad = []
    if limit is not None and not (0 < limit < float("inf")):
        bad.append(f"--limit {limit:g}: use a count of examples per task (e.g. 200) or a fraction below 1 (e.g. 0.1)")
    if num_fewshot is not None and num_fewshot < 0:
        bad.append(f"--num-fewshot {num_fewshot}: use 0 (zero-shot) or a positive count")
    if batch_size is not None and batch_size < 1:
        bad.append(f"--batch-size {batch_size}: use a positive count, or leave it out for the default")
    if output is not None and output.is_dir():
        bad.append(f"--output {output}: a directory is there; name a file, e.g. {output / 'eval.json'}")
    elif output is not None and not output.parent.is_dir():
        bad.append(f"--output {output}: its directory {output.parent} does not exist; create it or name another file")
    if bad:
        raise EvalError("; ".join(bad))
