"""Export a trained model as one GGUF file for llama.cpp, Ollama and LM Studio, checked.

The model (an adapter merged onto its base first) is written as a plain ``save_pretrained``
directory in a scratch place, converted by llama.cpp's own converter (the pinned copy in
``third_party/llama.cpp``, run in a child process: see ``gguf_child.py``), and the file is read
back and compared with that directory (``gguf_check.py``) before it is moved into place beside
an Ollama ``Modelfile``. A failed conversion or check leaves nothing at the destination and
says what differed.

Tokenizers: llama.cpp must split text into words the way the tokenizer's pre-tokenizer does
before BPE merges apply, and its converter names that pre-tokenizer by hashing the tokens of a
probe text, so it refuses tokenizers it has never seen (every one trained offline). A byte-level
BPE whose ``tokenizer.json`` has GPT-2's pre-tokenizer (``ByteLevel`` with its regex, no prefix
space, no normalizer) is mapped to llama.cpp's ``gpt-2`` one; other BPE tokenizers convert only
when the converter's table knows them, and tokenizers that are not BPE are refused before
converting (sentencepiece models, with their ``tokenizer.model``, go to the converter as is).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import ModelError
from clustertune.fsutil import replace_dir, temp_sibling
from clustertune.use.export import (_missing_parents, _write_model, check_destination, check_written, start_export_dir,
                                    undo_partial)
from clustertune.use.load import find_target, load_tokenizer_for
from clustertune.use.modelfile import modelfile

GGUF_QUANTS = ("f16", "q8_0")
MODELFILE = "Modelfile"
CONVERTER_PIN = "llama.cpp's convert_hf_to_gguf.py from the llama-cpp-python 0.3.36 source distribution"
_CHILD = Path(__file__).with_name("gguf_child.py")
_UNKNOWN_TOKENIZER_EXIT = 3  # gguf_child.UNKNOWN_TOKENIZER_EXIT (that file is run by path, not imported)


@dataclass(frozen=True)
class GgufExported:
    """What was written: the directory, the GGUF file in it, its quantization, and what the
    read-back check compared."""

    path: Path
    gguf: Path
    quant: str
    source: str
    pre_tokenizer: str
    files: list[str] = field(default_factory=list)
    fidelity: Any = None  # use/fidelity.py's Fidelity, where the file was checked against the trained model


def converter_dir() -> Path:
    """The pinned copy of llama.cpp's converter: in the source tree, or inside an installed wheel."""
    here = Path(__file__).resolve().parent.parent  # src/clustertune
    for candidate in (here.parent.parent / "third_party" / "llama.cpp", here / "_third_party" / "llama.cpp"):
        if (candidate / "convert_hf_to_gguf.py").is_file():
            return candidate
    raise ModelError(f"llama.cpp's converter is missing from this install (looked in {here.parent.parent / 'third_party'} "
                     f"and {here / '_third_party'}); reinstall clustertune")


def check_quant(quant: str) -> str:
    if quant not in GGUF_QUANTS:
        raise ModelError(f"--quant {quant!r}: choose one of {', '.join(GGUF_QUANTS)} (f16: full quality, "
                         "q8_0: about half the size)")
    return quant


def bpe_pre_tokenizer(model_dir: Path) -> str | None:
    """The pre-tokenizer to name when the converter's table does not know this tokenizer
    (``gpt-2``), None to leave it to the table; a typed error for a tokenizer that cannot convert."""
    spec_file = model_dir / "tokenizer.json"
    if not spec_file.is_file():
        if (model_dir / "tokenizer.model").is_file():
            return None  # sentencepiece: the converter reads tokenizer.model itself
        raise ModelError(f"{model_dir}: no tokenizer.json (a fast tokenizer) and no tokenizer.model; GGUF export "
                         "needs one of them. Save the tokenizer with a fast tokenizer class")
    spec = json.loads(spec_file.read_text(encoding="utf-8"))
    kind = (spec.get("model") or {}).get("type")
    if kind != "BPE":
        if (model_dir / "tokenizer.model").is_file():
            return None
        raise ModelError(f"the tokenizer is a {kind} model, not BPE: llama.cpp reads BPE tokenizers from "
                         "tokenizer.json (and sentencepiece ones from tokenizer.model); train the model with a "
                         "byte-level BPE tokenizer (model.tokenizer_vocab_size trains one) to export it as GGUF")
    pre = spec.get("pre_tokenizer") or {}
    if (pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space", False)
            and not spec.get("normalizer")):
        return "gpt-2"  # llama.cpp's name for it (its table gives openai-community/gpt2 this name)
    return None


def _describe_pre(model_dir: Path) -> str:
    pre = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8")).get("pre_tokenizer") or {}
    inner = [p.get("type") for p in pre.get("pretokenizers", [])]
    return f"{pre.get('type')}" + (f"[{', '.join(map(str, inner))}]" if inner else "")


def _converter_input(model_dir: Path) -> None:
    """What the pinned converter reads that transformers 5 no longer writes: GPT-2's ``n_ctx``
    (the converter takes the context length from it; transformers now keeps only ``n_positions``)."""
    path = model_dir / "config.json"
    config = json.loads(path.read_text())
    if config.get("model_type") == "gpt2" and "n_ctx" not in config:
        config["n_ctx"] = config["n_positions"]
        path.write_text(json.dumps(config, indent=2))


def convert(model_dir: Path, out: Path, quant: str, pre: str | None) -> None:
    """Run the pinned converter on ``model_dir`` in a child process; a typed error when it fails."""
    src = converter_dir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), str(src / "gguf-py")]), HF_HUB_OFFLINE="1",
               TRANSFORMERS_VERBOSITY="error", TQDM_DISABLE="1")
    cmd = [sys.executable, str(_CHILD), *(["--bpe-pre", pre] if pre else []),
           str(model_dir), "--outfile", str(out), "--outtype", quant]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode == _UNKNOWN_TOKENIZER_EXIT:
        raise ModelError(f"the tokenizer's pre-tokenizer ({_describe_pre(model_dir)}) is neither one llama.cpp's "
                         "converter knows nor GPT-2's byte-level one, so llama.cpp would split text differently "
                         "from the tokenizer; nothing was written")
    if done.returncode != 0 or not out.is_file():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise ModelError(f"llama.cpp's converter could not convert this model (exit {done.returncode}); nothing was "
                         f"written. Its last words:\n{tail}")


def export_gguf(ref: str, to: str | os.PathLike[str], *, runs_root: str | os.PathLike[str] | None = None,
                quant: str = "f16", force: bool = False, check: bool = True) -> GgufExported:
    """Write ``to/model-<quant>.gguf`` and ``to/Modelfile`` for what ``ref`` (a run id or a model
    directory) names; see the module doc. ``check``: the file, read by transformers' GGUF loader
    (its tokenizer metadata, its tensors dequantized), is compared with the trained model on
    held-out prompts first (use/fidelity.py)."""
    check_quant(quant)
    target = find_target(ref, runs_root)
    if target.step is not None:
        raise ModelError(f"{target.label}: export the checkpoint with --format hf first (`clustertune export "
                         f"{ref} --to DIR`), then that directory to GGUF")
    if target.classifier:
        raise ModelError(f"{target.label}: a sequence classifier; GGUF export is for generative models "
                         "(export it with --format hf)")
    out = check_destination(Path(to), target, force)
    made = _missing_parents(out)
    tmp = temp_sibling(out, "export")
    name = f"model-{quant}.gguf"
    try:
        start_export_dir(out, tmp, to)  # before the model is written out: a --to nothing can be made in fails first
        with tempfile.TemporaryDirectory(prefix="clustertune-gguf-") as scratch:
            merged = Path(scratch) / "model"
            merged.mkdir()
            _write_model(target, merged, None)
            pre = bpe_pre_tokenizer(merged)
            _converter_input(merged)
            convert(merged, tmp / name, quant, pre)
            # Deferred: the check reads with numpy and gguf, which the CLI's start-up does without.
            from clustertune.use.gguf_check import check_gguf

            problems = check_gguf(tmp / name, merged)
            if problems:
                raise ModelError(f"the GGUF file does not hold the model, so it was deleted ({CONVERTER_PIN}):\n  - "
                                 + "\n  - ".join(problems))
            fidelity = (check_written(target, tmp, artifact=f"the GGUF file ({quant})", precision=quant, gguf_file=name)
                        if check else None)
            template = load_tokenizer_for(target).chat_template
            template = template.get("default") if isinstance(template, dict) else template
            (tmp / MODELFILE).write_text(modelfile(name, template), encoding="utf-8")
        replace_dir(tmp, out)
    except BaseException:
        undo_partial(tmp, made)
        raise
    return GgufExported(path=out, gguf=out / name, quant=quant, source=target.label,
                        pre_tokenizer=pre or "the converter's own", files=sorted(p.name for p in out.iterdir()),
                        fidelity=fidelity)
