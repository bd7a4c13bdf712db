"""``export``: a run's model as a directory other tools load, optionally pushed to the hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from clustertune.cli.completion import complete_model
from clustertune.use.push import push_dir
from clustertune.errors import ModelError
from clustertune.use.export import export_model
from clustertune.use.gguf_export import GGUF_QUANTS, check_quant, export_gguf

FORMATS = ("hf", "gguf")


def export(
    ref: str = typer.Argument(..., metavar="RUN_ID|MODEL_DIR", autocompletion=complete_model,
                              help="A run id (a unique prefix, or `last`: the newest run), or a model directory."),
    to: Path = typer.Option(..., "--to", help="The directory to write (created; must not exist or be empty)."),
    merge: bool = typer.Option(False, "--merge", help="An adapter run: merge the adapter into its base (a plain model)."),
    dtype: Optional[str] = typer.Option(None, "--dtype", metavar="bf16|fp16|fp32",
                                        help="Convert the weights (default: keep the trained dtype)."),
    fmt: str = typer.Option("hf", "--format", metavar="hf|gguf",
                            help="hf: a transformers directory; gguf: one GGUF file for llama.cpp/Ollama/LM Studio "
                                 "(an adapter merged first), an Ollama Modelfile beside it, read back and checked."),
    quant: Optional[str] = typer.Option(None, "--quant", metavar="|".join(GGUF_QUANTS),
                                        help="With --format gguf: the weights' type (default f16)."),
    force: bool = typer.Option(False, "--force", help="Replace what is in --to."),
    push: Optional[str] = typer.Option(None, "--push", metavar="REPO_ID",
                                       help="Then upload it to this Hugging Face Hub model repository."),
    token: Optional[str] = typer.Option(None, "--token", show_default=False,
                                        help="Hub token for --push (default: $HF_TOKEN or `hf auth login`)."),
    private: bool = typer.Option(False, "--private", help="With --push: create the repository private."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip comparing the written model with the trained one "
                                  "on held-out prompts (template, tokens, greedy answers, log-probabilities)."),
    runs_root: Optional[Path] = typer.Option(None, "--runs-root", help="Where run directories live "
                                             "(default $CLUSTERTUNE_RUNS or ./runs)."),
) -> None:
    """Write a model directory that transformers.pipeline and serving engines load as is, or a GGUF file."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one bar per weight load and save: noise here
    if fmt not in FORMATS:
        raise ModelError(f"--format {fmt!r}: choose hf (a transformers directory) or gguf (llama.cpp, Ollama)")
    if fmt == "gguf":
        if dtype is not None:
            raise ModelError("--dtype is for --format hf; a GGUF file's weights are chosen with --quant "
                             f"({', '.join(GGUF_QUANTS)})")
        gg = export_gguf(ref, to, runs_root=runs_root, quant=check_quant(quant or "f16"), force=force,
                         check=not no_check)
        print(f"exported  {gg.source} as GGUF ({gg.quant}; pre-tokenizer: {gg.pre_tokenizer})")
        print("checked   read back: every tensor, the vocabulary and merges, special tokens, chat template")
        _print_fidelity(gg.fidelity, no_check)
        print(f"to        {gg.path}")
        print(f"files     {', '.join(gg.files)}")
        print(f"run it    llama-cli -m {gg.gguf}   or   cd {gg.path} && ollama create my-model -f Modelfile")
        written = gg.path
    else:
        if quant is not None:
            raise ModelError(f"--quant {quant}: only with --format gguf (a transformers directory takes --dtype)")
        done = export_model(ref, to, runs_root=runs_root, merge=merge, dtype=dtype, force=force, repo_id=push,
                            check=not no_check)
        article = "an" if done.kind[0] in "aeiou" else "a"
        print(f"exported  {done.source} as {article} {done.kind} ({done.dtype})")
        if done.kind != "adapter":
            _print_fidelity(done.fidelity, no_check)
        print(f"to        {done.path}")
        print(f"files     {', '.join(done.files)}")
        written = done.path
    if push is None:
        return

    pushed = push_dir(written, push, token=token, private=private)
    print(f"pushed    {pushed.url} (commit {pushed.commit[:12]})")


def _print_fidelity(found: Any, skipped: bool) -> None:
    if found is not None:
        print(f"answers   as trained: {found.summary()}")
    elif skipped:
        print("answers   not compared with the trained model (--no-check)")
