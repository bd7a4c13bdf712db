"""What is served is what was trained: an exported model, as the tools that serve it will load it,
answers the run's held-out prompts as the trained model does.

``export`` runs this on what it wrote before it moves it into place (a transformers directory:
loaded back by transformers; a GGUF file: its own tokenizer metadata and its dequantized tensors,
read by transformers' GGUF loader, which is other code than the converter that wrote it). For
each held-out prompt (the run's own validation conversations, as its generation check keeps
them; for a run without them, texts of its validation blocks; for a plain directory, questions
from the builtin corpus), both sides are compared on:

- the rendered prompt: the artifact's chat template against the trained one, character by character;
- the prompt's tokens: the artifact's tokenizer on its rendering against the trained tokenizer's;
- greedy answers: the trained model answers greedily; the artifact reads the same answer (teacher
  forcing) and its own greedy choice at every position is counted as agreeing or not (a single
  forward pass, and one early difference does not hide the rest);
- the log-probabilities of the trained model's answer under both: the mean absolute difference.

Any difference in a template or in tokens fails the check; so does a greedy agreement under the
threshold: 0.9 for models in their trained precision or halved (f16, bf16), 0.8 for 8-bit GGUF
(q8_0). A failure names the first difference: which prompt, where, and what each side had.
"""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.data.builtin import pydoc_paragraphs
from clustertune.data.manifest import load_manifest
from clustertune.data.shapes import open_split
from clustertune.data.staging import read_run_data
from clustertune.errors import UserError
from clustertune.use.generate import Generator, text_ids
from clustertune.use.load import Loaded, Target, load_model_for, load_tokenizer_for, pick_device

PROMPTS = 8
NEW_TOKENS = 16
AGREEMENT = {"q8_0": 0.8}  # the artifact's precision -> the least greedy agreement; others 0.9
DEFAULT_AGREEMENT = 0.9
_SHOWN = 24  # characters shown each side of a difference


@dataclass(frozen=True)
class HeldOut:
    """One prompt of the check: a conversation, or a plain text for models without a chat template."""

    messages: list[dict[str, str]] | None = None
    text: str | None = None

    @property
    def prompt(self) -> Any:
        return self.messages if self.messages is not None else self.text


@dataclass
class Fidelity:
    """What the check found, for the command's output and the model card."""

    artifact: str  # what was checked, e.g. "the merged model (bf16)"
    source: str  # where the prompts came from
    threshold: float
    prompts: int = 0
    templates_equal: int | None = None  # None: neither side has a chat template
    tokens_equal: int = 0
    agreeing: int = 0
    answer_tokens: int = 0
    logprob_gap: float = 0.0  # mean |trained - artifact| over the trained answers' tokens
    differences: list[str] = field(default_factory=list)  # the first of each kind, named

    @property
    def agreement(self) -> float:
        return self.agreeing / self.answer_tokens if self.answer_tokens else 1.0

    @property
    def passed(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        parts = [f"{self.prompts} held-out prompts ({self.source})"]
        if self.templates_equal is not None:
            parts.append(f"template {self.templates_equal}/{self.prompts} equal")
        parts += [f"tokens {self.tokens_equal}/{self.prompts} equal",
                  f"greedy agreement {self.agreement:.3f} (at least {self.threshold})",
                  f"log-prob difference {self.logprob_gap:.2e} a token"]
        return ", ".join(parts)



def threshold_for(precision: str) -> float:
    return AGREEMENT.get(precision, DEFAULT_AGREEMENT)


# -- the prompts ----------------------------------------------------------------------------------


def held_out(target: Target, tokenizer: Any, chat: bool, n: int = PROMPTS) -> tuple[list[HeldOut], str]:
    """Up to ``n`` prompts for the check, and where they came from."""
    found = _run_prompts(target, tokenizer, chat, n)
    if found:
        return found, f"the validation data of {target.label}"
    texts = []
    for para in pydoc_paragraphs():
        first = para.strip().split(". ")[0].strip()
        if 20 <= len(first) <= 160:
            texts.append(first)
        if len(texts) >= n:
            break
    if chat:
        return [HeldOut(messages=[{"role": "user", "content": t}]) for t in texts], "the builtin corpus"
    return [HeldOut(text=t) for t in texts], "the builtin corpus"


def _run_prompts(target: Target, tokenizer: Any, chat: bool, n: int) -> list[HeldOut]:
    """The run's held-out prompts (empty where the run has no prepared data left to read)."""
    if target.run is None or not target.run.paths.data.is_file():
        return []
    try:
        arrays = open_split(load_manifest(Path(read_run_data(target.run.paths).dir)), "validation")
    except (UserError, OSError, KeyError):
        return []  # the cache was cleared since: the builtin prompts stand in
    generation = getattr(arrays, "generation", None) or []
    if chat:
        # Data prepared before the conversations were kept with their prompts has none to
        # render again: the builtin prompts stand in.
        return [HeldOut(messages=p["messages"]) for p in generation[:n] if "messages" in p]
    if not hasattr(arrays, "input_ids") or len(arrays.input_ids) == 0:
        return []
    blocks = arrays.input_ids
    return [HeldOut(text=tokenizer.decode([int(t) for t in blocks[i][:24]], skip_special_tokens=True))
            for i in range(min(n, len(blocks)))]


# -- the comparison -------------------------------------------------------------------------------


def compare(t_gen: Generator, s_gen: Generator, prompts: list[HeldOut], *, artifact: str, source: str,
            threshold: float, new_tokens: int = NEW_TOKENS) -> Fidelity:
    """Compare ``s_gen`` (the artifact as it is served: its model, tokenizer and template) with
    ``t_gen`` (the trained model as it trained) on ``prompts``."""
    import torch

    trained, served = t_gen.loaded, s_gen.loaded
    out = Fidelity(artifact=artifact, source=source, threshold=threshold,
                   templates_equal=0 if t_gen.chat or s_gen.chat else None)
    first: dict[str, str] = {}
    gaps: list[float] = []
    for i, held in enumerate(prompts):
        out.prompts += 1
        if held.messages is not None and not (t_gen.chat and s_gen.chat):
            side = "the trained model" if not t_gen.chat else artifact
            first.setdefault("template", f"chat template: {side} has none, so it cannot render the conversations "
                                         "it was trained on")
            continue
        t_text = t_gen.prompt_text(held.prompt)
        s_text = s_gen.prompt_text(held.prompt)
        if out.templates_equal is not None:
            if t_text == s_text:
                out.templates_equal += 1
            else:
                first.setdefault("template", "chat template: prompt " + str(i + 1) + " renders differently "
                                 + _text_difference(t_text, s_text, artifact))
        # The prompts as each side writes them (generate's encoding, from the text rendered above).
        t_ids = text_ids(t_gen.tokenizer, t_text, add_special_tokens=not t_gen.chat)
        s_ids = text_ids(s_gen.tokenizer, s_text, add_special_tokens=not s_gen.chat)
        if t_ids == s_ids:
            out.tokens_equal += 1
        elif t_text == s_text:
            first.setdefault("tokens", f"tokenization: prompt {i + 1} " + _token_difference(t_gen, s_gen, t_ids, s_ids,
                                                                                             artifact))
        answer = _greedy(t_gen, t_ids, new_tokens)
        if not answer:
            continue
        t_lp = _answer_logprobs(trained.model, t_ids, answer, trained.device)
        s_lp = _answer_logprobs(served.model, s_ids, answer, served.device)
        t_choice, s_choice = t_lp.argmax(-1), s_lp.argmax(-1)
        want = torch.tensor(answer)
        # Ties in the trained model's own logits are counted as its answer, not as a difference.
        agree = (s_choice == want) | (s_choice == t_choice)
        out.agreeing += int(agree.sum())
        out.answer_tokens += len(answer)
        index = torch.arange(len(answer))
        gaps += (t_lp[index, want] - s_lp[index, want]).abs().tolist()
        if not bool(agree.all()) and "answer" not in first:
            k = int((~agree).nonzero()[0])
            first["answer"] = (f"prompt {i + 1}, answer token {k + 1}: the trained model answers "
                               f"{t_gen.tokenizer.decode([answer[k]])!r}, {artifact} "
                               f"{s_gen.tokenizer.decode([int(s_choice[k])])!r}")
    out.logprob_gap = sum(gaps) / len(gaps) if gaps else 0.0
    if not math.isfinite(out.logprob_gap):
        first.setdefault("answer", f"log-probabilities: {artifact} gives non-finite ones")
    out.differences = [first[k] for k in ("template", "tokens") if k in first]
    if "answer" in first and (out.agreement < threshold or not math.isfinite(out.logprob_gap)):
        out.differences.append(f"greedy agreement {out.agreement:.3f} is under {threshold}; first difference: "
                               + first["answer"])
    return out


def _text_difference(a: str, b: str, artifact: str) -> str:
    k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    lo = max(0, k - 8)
    return (f"at character {k + 1}: the trained template writes {a[lo:k + _SHOWN]!r}, {artifact}'s "
            f"{b[lo:k + _SHOWN]!r}")


def _token_difference(t_gen: Generator, s_gen: Generator, a: list[int], b: list[int], artifact: str) -> str:
    k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

    def shown(gen: Generator, ids: list[int]) -> str:
        return f"{gen.tokenizer.convert_ids_to_tokens(ids[k])!r} ({ids[k]})" if k < len(ids) else "nothing"

    return (f"differs at token {k + 1} of the same text: the trained tokenizer has {shown(t_gen, a)}, "
            f"{artifact}'s {shown(s_gen, b)}")


def _greedy(gen: Generator, ids: list[int], new_tokens: int) -> list[int]:
    import torch

    room = new_tokens if gen.context is None else min(new_tokens, gen.context - len(ids))
    if room <= 0:
        return []
    x = torch.tensor([ids], device=gen.device)
    tok = gen.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else (gen.eos_ids or [0])[0]
    with torch.inference_mode():
        out = gen.model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=room, do_sample=False,
                                 temperature=None, top_p=None, top_k=None, eos_token_id=gen.eos_ids or None,
                                 pad_token_id=pad)
    return [int(t) for t in out[0, len(ids):]]


def _answer_logprobs(model: Any, prompt: list[int], answer: list[int], device: str) -> Any:
    """Log-probabilities (float32, on the CPU) at each answer position: row k predicts answer[k]."""
    import torch

    x = torch.tensor([prompt + answer], device=device)
    with torch.inference_mode():
        logits = model(input_ids=x).logits[0, len(prompt) - 1: len(prompt) + len(answer) - 1]
    return torch.log_softmax(logits.float(), dim=-1).cpu()


# -- an export's artifact, loaded as the tools that serve it load it --------------------------------


def check_export(target: Target, out: Any, *, artifact: str, precision: str, gguf_file: str | None = None,
                 device: str | None = None) -> Fidelity:
    """:func:`compare` the model of ``target`` (in fp32, an adapter on its base unmerged, as it
    trained) with what was written to the directory ``out``: a transformers directory, or the
    GGUF file ``gguf_file`` in it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or pick_device()
    kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {"dtype": "auto"}
    if gguf_file:
        kwargs["config"] = _gguf_config(out, gguf_file)
    # transformers' GGUF loader draws a progress bar of its own on stderr (tqdm, which no
    # transformers setting turns off): nothing a user of export acts on.
    with contextlib.redirect_stderr(io.StringIO()) if gguf_file else contextlib.nullcontext():
        model = AutoModelForCausalLM.from_pretrained(str(out), **kwargs).to(device).eval()
    served = Loaded(target=Target(path=out, run=None, adapter=False, classifier=False), model=model,
                    tokenizer=AutoTokenizer.from_pretrained(str(out), **({"gguf_file": gguf_file} if gguf_file else {})),
                    device=device)
    at = reference_device(model, device)
    trained = Loaded(target=target, model=load_model_for(target, device=at, dtype="fp32"),
                     tokenizer=load_tokenizer_for(target), device=at)
    t_gen = Generator(trained)
    prompts, source = held_out(target, trained.tokenizer, t_gen.chat)
    return compare(t_gen, Generator(served), prompts, artifact=artifact, source=source,
                   threshold=threshold_for(precision))


def check_served(target: Target, served: Generator, *, merged: bool) -> Fidelity | None:
    """:func:`compare` a model as ``clustertune serve`` loaded it (its dtype, merged or not, the
    chat template it serves with) with the trained one. None where it is the trained model as it
    trained: fp32, an adapter unmerged, the run's own template (nothing could differ)."""
    import torch

    tokenizer = served.tokenizer  # the run's own, loaded by serve; only the template may differ
    own = Generator(Loaded(target=target, model=served.model, tokenizer=tokenizer, device=served.device))
    same_weights = served.model.dtype == torch.float32 and not merged
    if same_weights and own.template == served.template:
        return None
    at = reference_device(served.model, served.device)
    t_gen = own if same_weights else Generator(Loaded(
        target=target, model=load_model_for(target, device=at, dtype="fp32"), tokenizer=tokenizer, device=at))
    prompts, source = held_out(target, tokenizer, t_gen.chat)
    precision = str(served.model.dtype).removeprefix("torch.")
    what = ", ".join([precision] + (["merged"] if merged else [])
                     + (["another chat template"] if own.template != served.template else []))
    return compare(t_gen, served, prompts, artifact=f"the served model ({what})", source=source,
                   threshold=threshold_for(precision))


def _gguf_config(out: Any, gguf_file: str) -> Any:
    """The model's config as transformers reads it from the GGUF file's metadata, with one
    correction: it maps GPT-2's ``context_length`` to ``n_ctx``, which GPT2Config no longer reads
    (transformers 5 keeps only ``n_positions``), so the position table would be built 1,024 long."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(out), gguf_file=gguf_file)
    if config.model_type == "gpt2" and getattr(config, "n_ctx", None):
        config.n_positions = int(config.n_ctx)
    return config


def reference_device(served_model: Any, device: str) -> str:
    """Where the trained model is loaded in fp32 beside the served one: the same device when it
    has room for it (with a fifth to spare), else the CPU (slower, but a 13B model served in bf16
    on an 80 GB GPU leaves no room for its 52 GB fp32 twin)."""
    if not str(device).startswith("cuda"):
        return device
    import torch

    need = 4 * sum(p.numel() for p in served_model.parameters()) * 1.2
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return device if need <= free else "cpu"
