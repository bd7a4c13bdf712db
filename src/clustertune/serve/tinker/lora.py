"""LoRA training and sampling on shared base models: what the Tinker calls do to the weights.

One :class:`Base` holds a model once, however many training clients use it; each client is a
:class:`Trainee` with its own PEFT adapter on that base (and its own Adam state), switched in
for its requests. Every call here runs on the service's one worker thread, so none takes a lock.

Which layers get the adapter follows the SDK's ``LoraConfig``: ``train_attn`` the linear layers
inside attention blocks, ``train_mlp`` those inside MLP (feed-forward, expert) blocks, found by
the module path (``attn``/``attention`` and ``mlp``/``ffn``/``feed_forward``/``experts``),
``train_unembed`` the output layer. Where the output layer is tied to the input embedding
(GPT-2, many small models) the adapter's update reaches only the output side: the input
embedding keeps the base's weights.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustertune.errors import UserError
from clustertune.fsutil import atomic_write_json, replace_dir, temp_sibling
from clustertune.serve.protocol import shown

ATTN = re.compile(r"(^|\.)[^.]*(attn|attention)[^.]*\.")
MLP = re.compile(r"(^|\.)[^.]*(mlp|ffn|feed_forward|experts)[^.]*\.")
ADAPTER_WEIGHTS = "adapter_model.safetensors"
OPTIMIZER = "optimizer.pt"
STATE = "tinker_state.json"


class TinkerUserError(UserError):
    """A request the server cannot do as asked (the SDK's ``user`` error category)."""


LORA_KEYS = ("rank", "seed", "train_mlp", "train_attn", "train_unembed")  # the SDK's LoraConfig


@dataclass
class LoraSpec:
    rank: int
    seed: int | None = None
    train_mlp: bool = True
    train_attn: bool = True
    train_unembed: bool = True

    @classmethod
    def of(cls, raw: dict[str, Any] | None) -> LoraSpec:
        """The SDK's ``LoraConfig`` as sent, each field checked (:class:`TinkerUserError` names a wrong one)."""
        raw = dict(raw or {})
        # A misspelt switch (train_mpl) would train the default layers without a word.
        unknown = sorted(set(raw) - set(LORA_KEYS))
        if unknown:
            raise TinkerUserError(f"lora_config.{unknown[0]}: not a LoraConfig field ({', '.join(LORA_KEYS)}); "
                                  "leave it out")
        rank = raw.get("rank")
        if not isinstance(rank, int) or isinstance(rank, bool) or not 1 <= rank <= 4096:
            raise TinkerUserError(f"lora_config.rank {shown(rank)}: give a whole number from 1 to 4096 (8, 16, 32 "
                                  "are usual)")
        seed = raw.get("seed")
        # torch.manual_seed takes 64 bits; the SDK sends a plain int or nothing.
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63):
            raise TinkerUserError(f"lora_config.seed {shown(seed)}: give a whole number from 0 to 2**63 - 1, or none")
        switches = {}
        for key in ("train_mlp", "train_attn", "train_unembed"):
            v = raw.get(key, True)
            if not isinstance(v, bool):
                raise TinkerUserError(f"lora_config.{key} {shown(v)}: give true or false")
            switches[key] = v
        return cls(rank=rank, seed=seed, **switches)


def layer_kinds(model: Any) -> dict[str, str]:
    """The model's linear layers by full name: ``unembed``, ``attn``, ``mlp`` or ``other``
    (read from the plain model, before any adapter wraps its layers)."""
    import torch
    from transformers.pytorch_utils import Conv1D

    head = model.get_output_embeddings()
    kinds = {}
    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Linear, Conv1D)):
            kinds[name] = ("unembed" if module is head else "attn" if ATTN.search(name + ".")
                           else "mlp" if MLP.search(name + ".") else "other")
    return kinds


def target_modules(kinds: dict[str, str], spec: LoraSpec, what: str) -> list[str]:
    """Full names of the linear layers the adapter wraps under ``spec``."""
    wanted = {"unembed": spec.train_unembed, "attn": spec.train_attn, "mlp": spec.train_mlp}
    names = [n for n, kind in kinds.items() if wanted.get(kind, False)]
    if not names:
        raise TinkerUserError(f"lora_config (train_attn={spec.train_attn}, train_mlp={spec.train_mlp}, train_unembed="
                              f"{spec.train_unembed}) selects no layer of {what}: switch one on")
    return names


@dataclass
class Base:
    """A base model loaded once, and the adapters on it (training clients and sampler weights)."""

    ref: str
    path: Path
    model: Any
    tokenizer: Any
    device: str
    tokenizer_dir: Path | None = None
    adapters: set[str] = field(default_factory=set)
    samplers: dict[str, str] = field(default_factory=dict)  # sampler weights directory -> adapter name
    kinds: dict[str, str] = field(default_factory=dict)
    # Read once: an adapter changes neither, and the lookup through PEFT's wrappers costs about
    # 10 us a call, which a per-token check of a request multiplied into milliseconds.
    vocab: int = 0
    positions: int | None = None
    # The adapter this server last made active (None: not known, after any change of adapters).
    active: str | None = None

    def __post_init__(self) -> None:
        self.kinds = layer_kinds(self.model)
        self.vocab = int(self.model.get_input_embeddings().num_embeddings)
        n = getattr(self.model.config, "max_position_embeddings", None) or getattr(self.model.config, "n_positions", None)
        self.positions = int(n) if n else None

    def add(self, name: str, spec: LoraSpec) -> None:
        import torch
        from peft import LoraConfig, PeftModel, get_peft_model

        config = LoraConfig(r=spec.rank, lora_alpha=32, lora_dropout=0.0,
                            target_modules=target_modules(self.kinds, spec, type(self._plain()).__name__), bias="none")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed if spec.seed is not None else 0)
            with _quiet():
                if isinstance(self.model, PeftModel):
                    self.model.add_adapter(name, config)
                else:
                    self.model = get_peft_model(self.model, config, adapter_name=name)
        self.model.to(self.device)
        self.adapters.add(name)
        self.active = None

    def load(self, name: str, directory: Path) -> None:
        """An adapter written by :func:`write_adapter`, as ``name`` (frozen: sampling)."""
        from peft import PeftModel

        with _quiet():
            if isinstance(self.model, PeftModel):
                self.model.load_adapter(str(directory), adapter_name=name)
            else:
                self.model = PeftModel.from_pretrained(self.model, str(directory), adapter_name=name)
        self.model.to(self.device)
        self.adapters.add(name)
        self.active = None

    def drop(self, name: str) -> None:
        if name in self.adapters and len(self.adapters) > 1:
            self.model.delete_adapter(name)
        self.adapters.discard(name)
        self.active = None
        self.samplers = {k: v for k, v in self.samplers.items() if v != name}

    def _plain(self) -> Any:
        from peft import PeftModel

        return self.model.get_base_model() if isinstance(self.model, PeftModel) else self.model

    @contextlib.contextmanager
    def using(self, name: str | None, training: bool = False) -> Iterator[Any]:
        """The model with adapter ``name`` active (None: the base alone), in training mode or not.

        Both switches walk every module of the model (milliseconds a call on a small model), so
        each is made only when the model is not already so."""
        from peft import PeftModel

        if self.model.training != training:
            self.model.train(training)
        if not isinstance(self.model, PeftModel):
            assert name is None
            yield self.model
        elif name is None:
            with self.model.disable_adapter():
                yield self.model
        else:
            if self.active != name:
                self.model.set_adapter(name)
                self.active = name
            yield self.model

    def params(self, name: str) -> list[Any]:
        return [p for n, p in self.model.named_parameters() if f".{name}." in n]


@dataclass
class Trainee:
    """One training client: its adapter on a base and its optimizer."""

    model_id: str
    base: Base
    adapter: str
    spec: LoraSpec
    optimizer: Any = None
    steps: int = 0
    base_ref: str = ""  # the base as this client named it (several names may load one base)
    last_seq: int = 0  # the seq_id of the last request done for it
    restored_seq: int | None = None  # restored after a restart: the last seq_id its state includes


ADAM_KEYS = ("learning_rate", "beta1", "beta2", "eps", "weight_decay", "grad_clip_norm")
ADAM_DEFAULTS = {"learning_rate": 1e-4, "beta1": 0.9, "beta2": 0.95, "eps": 1e-12, "weight_decay": 0.0,
                 "grad_clip_norm": 0.0}


# Tinker documents Dimuon's hyperparameters but not its whole update: the matrix-sign iteration
# count and the normalisation epsilon are internal constants (tinker-docs.thinkingmachines.ai,
# types/DimuonParams), so no server outside Tinker can give the same steps.
DIMUON_WHY = (" (Dimuon's update is not fully published: its matrix-sign iteration count and normalisation are "
              "internal to Tinker, so this server cannot reproduce its steps)")


def adam_params(adam: Any) -> dict[str, float]:
    """``adam_params`` as AdamW's settings (the SDK's defaults where absent), each a finite
    number in its range, else :class:`TinkerUserError` naming it."""
    if not isinstance(adam, dict):
        raise TinkerUserError("adam_params: must be an object (the SDK's AdamParams)")
    unknown = sorted(set(adam) - set(ADAM_KEYS))
    if unknown:  # a misspelt setting (learning_rat) would step with the default
        raise TinkerUserError(f"adam_params.{unknown[0]}: not an AdamParams field ({', '.join(ADAM_KEYS)}); leave it "
                              "out")
    p = dict(ADAM_DEFAULTS)
    for key in ADAM_KEYS:
        v = adam.get(key)
        if v is None:
            continue
        # Compared, not converted: float() of a whole number past 1.8e308 raises OverflowError.
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not -sys.float_info.max <= v <= sys.float_info.max:
            raise TinkerUserError(f"adam_params.{key}: must be a finite number, not {shown(v)}")
        p[key] = float(v)
    if p["learning_rate"] < 0 or not 0 <= p["beta1"] < 1 or not 0 <= p["beta2"] < 1 or p["eps"] < 0 \
            or p["weight_decay"] < 0 or p["grad_clip_norm"] < 0:
        raise TinkerUserError(f"adam_params {p}: learning_rate, eps, weight_decay and grad_clip_norm >= 0 and "
                              "0 <= beta1, beta2 < 1 are needed")
    return p


def optim_step(t: Trainee, adam: dict[str, Any]) -> dict[str, float]:
    """One AdamW step (decoupled weight decay, torch's) on the gradients gathered since the last.

    A step that would leave a weight NaN or infinite is refused (:class:`TinkerUserError`) with
    the client's weights, Adam state and step count as they were: gradients that are not finite
    are found before anything changes (and dropped, so the client can go on), and a step that
    overflows all the same (a huge learning rate; eps 0 over a zero gradient) is undone from a
    copy taken before it."""
    import torch

    p = adam_params(adam)
    # The optimizer's own list once it exists (the same tensors; walking the model's parameters
    # by name costs about a millisecond a step).
    params = t.optimizer.param_groups[0]["params"] if t.optimizer is not None else t.base.params(t.adapter)
    grads = [q.grad for q in params if q.grad is not None]
    if grads and not _all_finite(grads):
        for q in params:
            q.grad = None
        raise TinkerUserError(
            f"optim_step refused for {t.model_id}: the gradients gathered since its last step are not finite (NaN or "
            "infinite: a loss that overflowed, inputs too large?); its weights and Adam state are unchanged and "
            "those gradients are dropped: send forward_backward again with smaller inputs")
    had_optimizer = t.optimizer is not None
    if t.optimizer is None:
        t.optimizer = torch.optim.AdamW(params, lr=p["learning_rate"], betas=(p["beta1"], p["beta2"]), eps=p["eps"],
                                        weight_decay=p["weight_decay"])
    # The state as it is, to put back if the step goes wrong (the adapter and its moments are
    # small beside the base model).
    weights = [q.detach().clone() for q in params]
    state = _state_copy(t.optimizer.state_dict()) if had_optimizer else None
    for group in t.optimizer.param_groups:
        group.update(lr=p["learning_rate"], betas=(p["beta1"], p["beta2"]), eps=p["eps"],
                     weight_decay=p["weight_decay"])
    metrics: dict[str, float] = {}
    if p["grad_clip_norm"] > 0:
        norm = torch.nn.utils.clip_grad_norm_(params, p["grad_clip_norm"])
        metrics["grad_norm:mean"] = float(norm)

    def put_back() -> None:
        with torch.no_grad():
            for q, w in zip(params, weights):
                q.copy_(w)
        if state is not None:
            t.optimizer.load_state_dict(state)  # its moments, step count and settings
        else:
            t.optimizer = None
        if p["grad_clip_norm"] > 0:  # the gradients were scaled in place: not the ones sent
            for q in params:
                q.grad = None

    kept = "dropped (clipping scaled them)" if p["grad_clip_norm"] > 0 else "kept"
    why = ("a learning rate too large, or eps 0 over a zero gradient; its weights and Adam state are unchanged and "
           f"the gradients are {kept}: step again with a smaller learning_rate or eps > 0")
    try:
        t.optimizer.step()
    except RuntimeError as exc:  # torch stops half way (its moments updated) when a value overflows float
        put_back()
        if "overflow" in str(exc):
            raise TinkerUserError(f"optim_step refused for {t.model_id}: with adam_params {p} the step overflows "
                                  f"({exc}): {why}") from None
        raise
    if not _all_finite(params):
        put_back()
        raise TinkerUserError(f"optim_step refused for {t.model_id}: with adam_params {p} this step would make "
                              f"weights NaN or infinite: {why}")
    t.optimizer.zero_grad(set_to_none=True)
    t.steps += 1
    return metrics


def _all_finite(tensors: list[Any]) -> bool:
    """No NaN or infinity in any of ``tensors``: their largest magnitudes in one fused call (a
    NaN or an infinity makes its own), then one sync. Empty tensors hold nothing to check."""
    import torch

    tensors = [x for x in tensors if x.numel()]
    if not tensors:
        return True
    return bool(torch.isfinite(torch.stack(torch._foreach_norm(tensors, float("inf")))).all())


def _state_copy(state: dict[str, Any]) -> dict[str, Any]:
    """An optimizer's ``state_dict`` with its tensors cloned: what ``copy.deepcopy`` gives, at a
    fraction of its cost (deepcopy walks every tensor through Python's copy protocol)."""
    import torch

    return {"state": {k: {n: v.clone() if isinstance(v, torch.Tensor) else copy.deepcopy(v) for n, v in s.items()}
                      for k, s in state["state"].items()},
            "param_groups": copy.deepcopy(state["param_groups"])}


def write_adapter(t: Trainee, directory: Path) -> None:
    """The adapter as PEFT writes one (``adapter_config.json``, ``adapter_model.safetensors``):
    ``clustertune generate``/``chat``/``export`` and PEFT read it as any adapter."""
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    # The tied embedding is not trained here (the adapter wraps the output side only): leave it out.
    state = get_peft_model_state_dict(t.base.model, adapter_name=t.adapter, save_embedding_layers=False)
    save_file({k: v.detach().contiguous().cpu() for k, v in state.items()}, str(directory / ADAPTER_WEIGHTS))
    config = t.base.model.peft_config[t.adapter].to_dict()
    config["base_model_name_or_path"] = str(t.base.path)
    config = {k: sorted(v) if isinstance(v, set) else v for k, v in config.items()}
    (directory / "adapter_config.json").write_text(json.dumps(config, indent=2, default=str) + "\n", encoding="utf-8")


def save_state(t: Trainee, directory: Path, *, optimizer: bool, kind: str) -> None:
    """Weights (and the optimizer's state) of ``t`` into ``directory``, written whole or not at all."""
    import torch

    import shutil

    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(directory)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write_adapter(t, tmp)
        if optimizer and t.optimizer is not None:
            torch.save(t.optimizer.state_dict(), tmp / OPTIMIZER)
        atomic_write_json(tmp / STATE, {"kind": kind, "model_id": t.model_id, "base_model": t.base.ref,
                                        "base_path": str(t.base.path), "lora": vars(t.spec), "steps": t.steps,
                                        "seq": t.last_seq, "optimizer": optimizer and t.optimizer is not None})
        replace_dir(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_state(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((directory / STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TinkerUserError(f"{directory}: not a checkpoint this server wrote ({exc})") from None


def load_state(t: Trainee, directory: Path, *, optimizer: bool) -> None:
    """Weights (and optimizer state) saved by :func:`save_state` into ``t``'s adapter.

    Everything that can refuse the checkpoint (its LoRA settings, whether it holds optimizer
    state, files missing or unreadable, keys that do not fit) is checked before the client
    changes: a refused load leaves its weights, Adam state and step count as they were."""
    import torch
    from peft.utils import set_peft_model_state_dict
    from safetensors.torch import load_file

    meta = read_state(directory)
    _check_spec(t, meta.get("lora"))
    if optimizer and not meta.get("optimizer"):
        raise TinkerUserError(f"{directory} holds no optimizer state (saved for sampling, or without it): "
                              "load_state without the optimizer")
    try:
        weights = load_file(str(directory / ADAPTER_WEIGHTS), device=t.base.device)
        state = torch.load(directory / OPTIMIZER, map_location=t.base.device, weights_only=True) if optimizer else None
    except (OSError, RuntimeError, ValueError) as exc:  # deleted or damaged on disk: nothing the server can mend
        raise TinkerUserError(f"{directory}: the checkpoint cannot be read ({type(exc).__name__}: {exc}); save it "
                              "again") from None
    # set_peft_model_state_dict writes what fits before the misfit is known: the weights as they
    # were are kept to put back.
    before = [p.detach().clone() for p in t.base.params(t.adapter)]
    result = set_peft_model_state_dict(t.base.model, weights, adapter_name=t.adapter)
    missing = [k for k in getattr(result, "unexpected_keys", []) if f".{t.adapter}." in k]
    new_optimizer = None
    try:
        if missing:
            raise TinkerUserError(f"the checkpoint's adapter does not fit this client's layers ({missing[0]} ...)")
        if state is not None:
            new_optimizer = torch.optim.AdamW(t.base.params(t.adapter))
            try:
                new_optimizer.load_state_dict(state)
            except (ValueError, KeyError) as exc:
                raise TinkerUserError(f"{directory}: its optimizer state does not fit this client's adapter ({exc}): "
                                      "load_state without the optimizer, or create the client from the "
                                      "checkpoint") from None
    except TinkerUserError:
        with torch.no_grad():
            for q, w in zip(t.base.params(t.adapter), before):
                q.copy_(w)
        raise
    t.optimizer = new_optimizer
    if optimizer:
        t.steps = int(meta.get("steps", 0))
    t.restored_seq = None


def _check_spec(t: Trainee, saved: Any) -> None:
    """The checkpoint's LoRA settings against the client's: rank and the layers trained (the
    seed only drew the first weights, so it may differ)."""
    if not isinstance(saved, dict):
        raise TinkerUserError("the checkpoint records no LoRA settings: not one this server wrote")
    ours = vars(t.spec)
    differ = [f"{k} {saved.get(k)!r} (this client: {ours[k]!r})" for k in ("rank", "train_mlp", "train_attn",
                                                                           "train_unembed")
              if saved.get(k, True if k != "rank" else None) != ours[k]]
    if differ:
        raise TinkerUserError(f"the checkpoint's LoRA settings differ from this training client's: {', '.join(differ)}"
                              ": create the client with the checkpoint's settings "
                              "(create_training_client_from_state)")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """PEFT warns that a tied output layer is adapted on its output side only: said in this
    module's documentation, nothing a client can act on."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
