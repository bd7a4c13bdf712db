"""The recipe schema: one typed model per section, a docstring per field.

The docstrings are the documentation (``use_attribute_docstrings``): ``clustertune schema``
(every key), ``clustertune validate --explain`` (the keys a recipe sets) and the JSON Schema for
editors (``recipes/recipe.schema.json``) read them from here, through recipe/keys.py. Unknown keys are errors (``extra="forbid"``).
Checks that need no network live here; checks that need a model config or a dataset
(block size vs positions, column names) run at the start of ``clustertune run``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from clustertune.recipe.adapter_schema import AdapterSection, adapter_problems
from clustertune.recipe.launch_checks import launch_problems
from clustertune.recipe.launch_schema import LaunchSection
from clustertune.recipe.section import Section
from clustertune.recipe.sft_schema import SFTSection

Task = Literal["causal_lm", "sequence_classification", "sft", "rlhf"]
TASKS: tuple[str, ...] = ("causal_lm", "sequence_classification", "sft", "rlhf")
TOKENIZER_TRAIN = "train"


def _override_scalar(text: str) -> Any:
    """A value of the ``k=v`` string form as run_clm writes it: a number, true/false, none, else
    the text; the model's config then gives it the type it holds (models/build.py)."""
    for kind in (int, float):
        try:
            number = kind(text)
        except ValueError:
            continue
        if math.isfinite(number):
            return number
    return {"true": True, "false": False, "none": None, "null": None}.get(text.lower(), text)


def config_overrides_from_text(text: str) -> dict[str, Any]:
    """run_clm's ``--config_overrides`` form, ``"n_embd=128,n_head=4"``, as a mapping."""
    out: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, eq, raw = part.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ValueError(f"{part!r} is not name=value; write config overrides as \"n_embd=128,n_head=4\" "
                             "(run_clm's --config_overrides) or as a mapping {n_embd: 128, n_head: 4}")
        if name in out:
            raise ValueError(f"{name!r} is given twice in {text!r}; keep one")
        out[name] = _override_scalar(raw.strip())
    return out


def _mapping_or_text(schema: dict[str, Any]) -> None:
    """Editors accept the ``k=v`` string form too (the validator below turns it into a mapping)."""
    for k in ("type", "additionalProperties"):
        schema.pop(k, None)
    schema["anyOf"] = [{"type": "object", "additionalProperties": True}, {"type": "string"}]


class ModelSection(Section):
    name_or_path: str | None = None
    """Pretrained weights: a Hugging Face Hub name (``gpt2``, ``bert-base-cased``), a local
    directory written by ``save_pretrained``, or ``run:<run-id>`` for the final model of an
    earlier clustertune run (``run:<run-id>@step-N``: its checkpoint of step N). Exactly one of
    ``name_or_path`` and ``config``."""

    revision: str | None = None
    """Hub revision of ``name_or_path`` (a branch, tag or commit), as ``from_pretrained(...,
    revision=)`` takes it; default ``main``. Applies to its weights, config and tokenizer (when
    ``tokenizer`` is unset); the commit used is recorded in run.json (``model.commit``)."""

    trust_remote_code: bool = False
    """Run the modelling code a model ships beside its weights (a config.json whose
    ``auto_map`` names its own classes). Off: such a model is refused before anything runs,
    naming this key. Only turn it on for a model whose code you trust: it runs with your rights."""

    config: str | None = None
    """Build a fresh, randomly initialised model: a model type (``gpt2``, ``bert``, ``llama``),
    or a path to a ``config.json`` or a directory holding one."""

    config_overrides: dict[str, Any] = Field(default_factory=dict, json_schema_extra=_mapping_or_text)
    """Config attributes to change before the model is built, e.g. ``{n_layer: 2, n_embd: 64}``,
    or as run_clm's ``--config_overrides`` string ``"n_embd=128,n_head=4"``. Each value takes the
    type the model's config holds for it (``128`` stays an int, ``resid_pdrop=0`` becomes a float,
    ``scale_attn_weights=false`` a bool); an attribute the config lacks is an error with a
    did-you-mean."""

    tokenizer: str | None = None
    """Tokenizer: a hub name, a local directory, or ``train`` to train a byte-level BPE on the
    training text. Defaults to ``name_or_path``; required with ``config``."""

    tokenizer_vocab_size: int = Field(default=4096, ge=256, le=1_000_000)
    """Vocabulary size when ``tokenizer: train``."""

    num_labels: int | None = Field(default=None, ge=2)
    """Number of classes for ``sequence_classification``; unset: inferred from the data (the
    label names, or the largest integer label + 1)."""

    ignore_mismatched_sizes: bool = False
    """Pretrained weights whose shape no longer fits the model (``config_overrides`` that change
    a width) are re-initialised instead of refused. A classification head with another
    ``num_labels`` is always re-initialised (and logged)."""

    low_cpu_mem_usage: bool = True
    """Load pretrained weights without first materialising a randomly initialised copy
    (transformers 5 always does this; the switch matters for transformers 4)."""

    attn_implementation: str | None = None
    """Attention kernel passed to transformers (``sdpa``, ``eager``, ``flash_attention_2``)."""

    adapter: AdapterSection | None = None
    """Train an adapter (LoRA, DoRA, QLoRA through PEFT) on the frozen pretrained weights instead
    of every weight: checkpoints hold the adapter and its optimizer state only, and ``model/``
    is a PEFT adapter directory (``PeftModel.from_pretrained`` loads it onto the base)."""

    @field_validator("config_overrides", mode="before")
    @classmethod
    def _overrides_string(cls, value: Any) -> Any:
        return config_overrides_from_text(value) if isinstance(value, str) else value


class DataSection(Section):
    dataset: str | None = None
    """Where the examples come from: ``builtin:pydoc`` (Python's reference documentation, offline,
    causal LM), ``builtin:pydoc-kinds`` (its lines labelled prose or code, offline, 2 classes), a hub
    dataset name (``wikitext``), or a directory written by ``datasets.save_to_disk``.
    Exactly one of ``dataset`` and ``train_files``."""

    dataset_config: str | None = None
    """Hub dataset configuration, e.g. ``wikitext-2-raw-v1``."""

    dataset_revision: str | None = None
    """Hub dataset revision (branch, tag or commit); default ``main``. It is resolved to a commit
    (from the hub when online, from the local snapshot offline) and that commit is part of the
    prepared data's fingerprint."""

    train_files: list[str] = Field(default_factory=list)
    """Local training files: .txt (one example per line), .json/.jsonl, .csv or .parquet."""

    keep_linebreaks: bool = True
    """.txt files: each line keeps its line break, blank lines included (run_clm.py's
    ``keep_linebreaks``), so code and verse keep their shape; false drops them."""

    validation_files: list[str] = Field(default_factory=list)
    """Local validation files, same formats as ``train_files``."""

    train_split: str = "train"
    """Split used for training when ``dataset`` has splits."""

    validation_split: str = "validation"
    """Split used for evaluation when ``dataset`` has it; otherwise one is carved from train."""

    validation_fraction: float = Field(default=0.05, gt=0.0, lt=1.0)
    """Fraction of the training examples held out when no validation split or files exist."""

    validation_carve: Literal["random", "first"] = "random"
    """How that fraction is chosen: ``random`` (a permutation drawn with ``split_seed``) or
    ``first`` (the first examples, run_clm.py's ``train[:5%]``). The training seed never moves it."""

    split_seed: int = 42
    """Seed of the ``random`` validation carve-out."""

    text_column: str = "text"
    """Column holding the text."""

    label_column: str = "label"
    """Column holding the class labels (``sequence_classification``): integers (used as the
    class ids), a ``ClassLabel`` column (ids with names), or strings (names, given ids in sorted
    order, as ``run_glue.py`` does). The names are saved in the model's config (``id2label``,
    ``label2id``), so ``pipeline("text-classification")`` prints them."""

    label_names: list[str] | None = None
    """String labels: the class names in id order (``[negative, positive]``) instead of their
    sorted order; every label in the data must be one of them."""

    block_size: int = Field(default=128, ge=2, le=2**20)
    """Causal LM: tokens per training block. The whole text is concatenated once and cut into
    blocks; the remainder is dropped. Must not exceed the model's positions."""

    max_length: int = Field(default=128, ge=2, le=2**20)
    """The most tokens of one example (classification and SFT). Classification truncates and
    pads examples to this many tokens; SFT applies it to one example (see ``data.sft.too_long``)
    and to one packed row."""

    truncation: Literal["error", "allow"] = "error"
    """Examples cut at ``max_length`` (SFT and classification): prepare always prints the share
    of examples and of trained tokens cut; above 5% of either, ``error`` stops before training
    with the numbers and the fixes (raise ``max_length``, ``data.sft.too_long=drop``), ``allow``
    goes on."""

    sft: SFTSection = Field(default_factory=SFTSection)
    """``task: sft``: data format, chat template, which tokens carry the loss, packing."""

    max_train_samples: int | None = Field(default=None, ge=1)
    """Keep only N training samples (blocks for causal LM, examples for classification),
    chosen as ``sample_selection`` says."""

    max_eval_samples: int | None = Field(default=None, ge=1)
    """Keep only N evaluation samples (chosen as ``sample_selection`` says)."""

    sample_selection: Literal["first", "shuffled"] = "first"
    """Which samples ``max_train_samples``/``max_eval_samples`` keep: the ``first`` N (the
    default, run_clm.py's), or N ``shuffled`` with ``sample_seed`` (``shuffle(seed).select(range(N))``:
    the same rows in the same order), which matters on sorted data."""

    sample_seed: int = 42
    """Seed of ``sample_selection: shuffled``."""

    cache_dir: str | None = None
    """Root of the prepared-data cache (content-addressed: ``<cache_dir>/<fingerprint>/``).
    Defaults to ``$CLUSTERTUNE_CACHE``, else ``$XDG_CACHE_HOME/clustertune`` or
    ``~/.cache/clustertune``. Put it on a filesystem the nodes share."""

    workers: int | None = Field(default=None, ge=1)
    """Processes that tokenize when data is prepared. ``clustertune prepare --workers`` wins;
    unset: ``$SLURM_CPUS_PER_TASK``, else the CPUs this process may run on."""

    streaming: bool = False
    """Causal LM on corpora too large to prepare: the training text is tokenized and packed on the
    fly, as one global stream of blocks in the text's order (the same blocks prepare would cut),
    sharded across ranks by block index and resumable. Needs ``train.max_steps`` and a
    validation split or ``validation_files`` (only the validation data is prepared)."""

    stage_to: str | None = None
    """Copy this run's prepared files to node-local disk before training, once per node (local
    rank 0 copies, the other local ranks wait), verified by size and checksum. Environment
    variables expand on the node, e.g. ``$SLURM_TMPDIR``; where one is unset, a per-job
    directory under the node's temporary directory is used (and named in the log)."""


class TrainSection(Section):
    batch_size: int = Field(default=8, ge=1)
    """Micro-batch size per device (per process)."""

    eval_batch_size: int | None = Field(default=None, ge=1)
    """Evaluation batch size per device; defaults to ``batch_size``."""

    gradient_accumulation_steps: int = Field(default=1, ge=1)
    """Micro-batches accumulated per optimizer step."""

    optimizer: Literal["adamw", "adafactor", "sgd", "adamw_8bit", "paged_adamw_8bit"] = "adamw"
    """``adamw`` (torch's, fused on a GPU), ``adafactor`` (factored second moments: a row and a
    column per matrix instead of a full copy; transformers' implementation, driven by
    ``train.lr`` and the schedule, no relative step), ``sgd`` (with ``train.momentum``),
    ``adamw_8bit`` (bitsandbytes: both moments in 8 bits, a quarter of AdamW's state; runs on CPU
    too), ``paged_adamw_8bit`` (the same, its state paged to host memory when the GPU runs short;
    GPU only). The spellings of ``TrainingArguments.optim`` (``adamw_torch``,
    ``adamw_bnb_8bit``...) are read as these. DeepSpeed builds the optimizer its config names."""

    momentum: float = Field(default=0.9, ge=0.0, lt=1.0)
    """SGD's momentum (``train.optimizer: sgd`` only)."""

    lr: float = Field(default=5e-5, gt=0.0)
    """Peak learning rate."""

    weight_decay: float = Field(default=0.0, ge=0.0)
    """Decoupled weight decay (SGD: L2 in the gradient); never applied to biases and
    normalisation weights."""

    @field_validator("optimizer", mode="before")
    @classmethod
    def _optimizer_spelling(cls, v: Any) -> Any:
        return OPTIMIZER_SPELLINGS.get(v, v) if isinstance(v, str) else v

    adam_beta1: float = Field(default=0.9, ge=0.0, lt=1.0)
    """AdamW beta1 (also the 8-bit AdamWs')."""

    adam_beta2: float = Field(default=0.999, ge=0.0, lt=1.0)
    """AdamW beta2."""

    adam_eps: float = Field(default=1e-8, gt=0.0)
    """AdamW epsilon."""

    max_grad_norm: float | None = Field(default=1.0, gt=0.0)
    """Clip the global gradient norm to this value; null turns clipping off."""

    lr_scheduler: Literal["linear", "cosine", "constant"] = "linear"
    """Decay after warmup."""

    warmup_steps: int = Field(default=0, ge=0)
    """Linear warmup steps (wins over ``warmup_ratio`` when both are set)."""

    warmup_ratio: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Warmup as a fraction of the total steps."""

    max_steps: int | None = Field(default=None, ge=1)
    """Optimizer steps to train; wins over ``epochs``."""

    epochs: float = Field(default=3.0, gt=0.0)
    """Passes over the training data when ``max_steps`` is not set."""

    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    """Mixed precision: ``auto`` is bf16 on GPUs that have it, fp16 on older GPUs; on CPU bf16
    where the processor has bf16 instructions (``avx512_bf16`` or ``amx_bf16`` among its flags:
    AMD Zen 4, Intel Sapphire Rapids and later), else fp32. What ``auto`` became is recorded in
    run.json (each attempt's ``precision``) and summary.json. Pin ``fp32`` for results that must
    be the same on every machine."""

    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""

    eval_every: int | Literal["epoch"] | None = None
    """Evaluate every N optimizer steps, or ``epoch``: at the end of every epoch (and always at
    the end of training)."""

    metrics: list[str] = Field(default_factory=list)
    """``sequence_classification``: metrics computed at each evaluation beside the loss and
    accuracy: built-in names (``f1``, ``f1_macro``, ``precision``, ``recall``,
    ``matthews_correlation``) or your own function as ``module:function``, called as
    ``fn(predictions, labels)`` (integer numpy arrays of the whole evaluation set) and returning
    a float or a dict of floats (logged as ``eval_<name>``)."""

    eval_at_start: bool = False
    """Evaluate once before the first step (step 0)."""

    preflight: bool = True
    """Check the first batches once per run before the first step: trained tokens in every batch
    (SFT), packed rows giving their examples' loss alone and never attending across them, a model
    built from a config starting near ln(vocab), the adapter training what it targets, a chat
    template's markers being single tokens. It costs a few forward passes; the result is kept in
    run.json (the attempt's ``preflight``). A failed check stops the run with its fix."""

    log_every: int = Field(default=10, ge=1)
    """Read the loss back from the device and log every N steps (the only sync in the loop)."""

    save_every: int | None = Field(default=None, ge=1)
    """Write a checkpoint every N optimizer steps."""

    save_every_minutes: float | None = Field(default=30.0, gt=0)
    """Also write a checkpoint once this many minutes of training have passed since the last one
    (looked at on log steps), so a long run keeps something without ``save_every``; null: steps
    only. Supervised runs (RL runs save on ``save_every``)."""

    keep_last: int = Field(default=2, ge=1)
    """Checkpoints kept on disk; older ones are deleted after a new one is complete."""

    seed: int = Field(default=42, ge=0, lt=2**32)
    """Seed for initialisation, data order and dropout (the validation carve-out has ``data.split_seed``)."""

    shuffle: bool = True
    """Shuffle the training samples each epoch (deterministically from ``seed`` and epoch)."""

    device: Literal["auto", "cpu"] = "auto"
    """``cpu`` trains on the CPU even where GPUs are visible (run_clm.py's ``--use_cpu``): the
    training processes see no GPU (``CUDA_VISIBLE_DEVICES=""``). ``auto``: the GPUs when there are
    any. To pick GPUs, set ``CUDA_VISIBLE_DEVICES`` in ``launch.env``."""

    cpu_threads: int | None = Field(default=None, ge=1)
    """torch intra-op threads (CPU training); unset keeps torch's default."""

    peak_flops: float | None = Field(default=None, gt=0.0)
    """Peak FLOP/s of one device, for MFU; known GPUs are looked up when unset."""

    strategy: Literal["ddp", "fsdp", "deepspeed"] = "ddp"
    """How work is split across processes: ``ddp`` (each process holds the whole model),
    ``fsdp`` (PyTorch FSDP2: parameters, gradients and optimizer state sharded), ``deepspeed``
    (DeepSpeed ZeRO, stage from ``zero_stage``; the ``deepspeed`` extra: ``clustertune doctor``
    prints how to install it here). Unset with ``deepspeed_config``: ``deepspeed``."""

    zero_stage: Literal[0, 1, 2, 3] | None = None
    """DeepSpeed ZeRO stage: 0 shards nothing (DeepSpeed's engine, each process holds
    everything), 1 shards optimizer state, 2 also gradients, 3 also parameters. Only with
    ``strategy: deepspeed``; unset means ``deepspeed_config``'s stage, else the preset's, else 2."""

    offload: Literal["none", "optimizer", "params"] | None = None
    """Unset means the preset's, else ``none``. Keep state in host memory to fit bigger models: ``optimizer`` (optimizer state, and the
    optimizer step runs on the CPU), ``params`` (parameters too: DeepSpeed ZeRO-3 or FSDP).
    Needs ``strategy: deepspeed`` or ``fsdp``."""

    deepspeed_preset: Literal["zero2-offload", "zero3-offload"] | None = None
    """A seed configuration people copy: ``zero2-offload`` (ZeRO-2, optimizer in host memory),
    ``zero3-offload`` (ZeRO-3, optimizer and parameters in host memory). Sets ``zero_stage``
    and ``offload``; setting them too is an error when they disagree."""

    deepspeed_config: str | None = None
    """Path to your DeepSpeed JSON config (implies ``strategy: deepspeed``). It is the source of
    truth: a recipe key you leave unset takes the JSON's value (ZeRO stage, offload, optimizer
    and scheduler values, batch sizes, clipping, ``fp16``/``bf16`` for ``precision: auto``); a key
    you set yourself may restate it, and a different value is an error naming both places. Its
    ``"auto"`` values are filled from the recipe as Hugging Face's integration fills them."""

    compile: bool | None = None
    """``torch.compile`` the model: on by default on a GPU, off on CPU. When compilation fails,
    training falls back to eager mode and says why."""

    fused_adamw: bool | None = None
    """Fused AdamW kernel (one kernel for all parameters): on by default on a GPU."""

    pad_vocab_multiple: int | None = Field(default=None, ge=1)
    """Models built from a config, and pretrained embeddings grown for a larger tokenizer: round
    the vocabulary up to a multiple of this (tensor cores like multiples of 64). Default 64 on a
    GPU, 1 (no padding) on CPU."""

    tf32: bool | None = None
    """TF32 tensor cores for float32 matmuls (``torch.set_float32_matmul_precision("high")``):
    on by default on a GPU; CPU has no TF32."""

    collective_timeout_minutes: float = Field(default=30.0, gt=0.0)
    """How long a rank waits in a collective (a barrier, an all-reduce) before the job fails.
    Raise it when sealing large checkpoints on a slow shared filesystem takes longer."""

    @model_validator(mode="before")
    @classmethod
    def _json_implies_deepspeed(cls, data: Any) -> Any:
        # A DeepSpeed JSON is run by DeepSpeed: naming one is choosing the strategy (a recipe
        # that also names another strategy is refused by strategy_problems).
        if isinstance(data, dict) and data.get("deepspeed_config") and "strategy" not in data:
            return {**data, "strategy": "deepspeed"}
        return data

    @field_validator("eval_every", mode="before")
    @classmethod
    def _steps_or_epoch(cls, value: Any) -> Any:
        if value is None or value == "epoch":
            return value
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError("expected a number of steps (1 or more) or 'epoch'")
        return value

    @property
    def effective_zero_stage(self) -> int:
        if self.zero_stage is not None:
            return self.zero_stage
        return PRESETS[self.deepspeed_preset][0] if self.deepspeed_preset else 2

    @property
    def effective_offload(self) -> str:
        if self.offload is not None:
            return self.offload
        return PRESETS[self.deepspeed_preset][1] if self.deepspeed_preset else "none"


# Evaluation metrics computed from predictions and labels (train.metrics); accuracy always is.
BUILTIN_METRICS: tuple[str, ...] = ("accuracy", "f1", "f1_macro", "precision", "recall", "matthews_correlation")


def classification_problems(recipe: Recipe) -> list[tuple[str, str]]:
    """Label and metric settings that need no data to be checked."""
    out: list[tuple[str, str]] = []
    t, d = recipe.train, recipe.data
    cls = recipe.task == "sequence_classification"
    if t.metrics and not cls:
        out.append(("train.metrics", f"only for task sequence_classification (task is {recipe.task!r})"))
    for i, name in enumerate(t.metrics):
        if ":" in name:
            module, _, attr = name.partition(":")
            if not module or not attr:
                out.append((f"train.metrics.{i}", f"{name!r} must look like module:function, e.g. my_metrics:score"))
        elif name not in BUILTIN_METRICS:
            out.append((f"train.metrics.{i}", f"unknown metric {name!r}: use one of {', '.join(BUILTIN_METRICS)} "
                        "or your own function as module:function"))
    if d.label_names is not None:
        if not cls:
            out.append(("data.label_names", f"only for task sequence_classification (task is {recipe.task!r})"))
        elif len(set(d.label_names)) != len(d.label_names) or len(d.label_names) < 2:
            out.append(("data.label_names", "needs two or more distinct names"))
        elif recipe.model.num_labels is not None and recipe.model.num_labels != len(d.label_names):
            out.append(("model.num_labels", f"{recipe.model.num_labels} contradicts data.label_names "
                        f"({len(d.label_names)} names); drop model.num_labels"))
    if t.eval_every == "epoch" and d.streaming:
        out.append(("train.eval_every", "a stream has no epochs: give a number of steps"))
    return out


def strategy_problems(t: TrainSection) -> list[tuple[str, str]]:
    """Strategy switches that contradict each other (checked without importing DeepSpeed)."""
    out: list[tuple[str, str]] = []
    ds_only = [k for k in ("zero_stage", "deepspeed_preset", "deepspeed_config") if getattr(t, k) is not None]
    if t.strategy != "deepspeed" and ds_only:
        out.extend((f"train.{k}", f"only used with train.strategy=deepspeed (strategy is {t.strategy!r})")
                   for k in ds_only)
    if t.effective_offload != "none" and t.strategy == "ddp":
        out.append(("train.offload", "offloading needs train.strategy=deepspeed or fsdp (ddp keeps "
                    "everything on the device)"))
    if t.effective_offload != "none" and t.strategy == "deepspeed" and t.effective_zero_stage == 0:
        out.append(("train.offload", "offloading needs ZeRO (train.zero_stage 1, 2 or 3); stage 0 keeps "
                    "everything on the device"))
    elif t.effective_offload == "params" and t.strategy == "deepspeed" and t.effective_zero_stage != 3:
        out.append(("train.offload", "params offload needs train.zero_stage=3 (stages 1 and 2 keep "
                    "parameters on the device)"))
    if t.optimizer != "adamw" and t.strategy == "deepspeed":
        out.append(("train.optimizer", f"{t.optimizer}: DeepSpeed builds the optimizer its config names; leave "
                    "train.optimizer at adamw, or name the optimizer in train.deepspeed_config (optimizer.type)"))
    if t.optimizer in ("adamw_8bit", "paged_adamw_8bit") and t.strategy == "fsdp":
        out.append(("train.optimizer", f"{t.optimizer}: bitsandbytes' 8-bit state does not shard with FSDP; "
                    "use adamw (or adafactor) with fsdp, or ddp with the 8-bit optimizer"))
    if t.deepspeed_preset is not None:
        stage, offload = PRESETS[t.deepspeed_preset]
        if t.zero_stage is not None and t.zero_stage != stage:
            out.append(("train.zero_stage", f"{t.zero_stage} contradicts deepspeed_preset "
                        f"{t.deepspeed_preset!r} (stage {stage}), drop one of them"))
        if t.offload is not None and t.offload != offload:
            out.append(("train.offload", f"{t.offload!r} contradicts deepspeed_preset "
                        f"{t.deepspeed_preset!r} (offload {offload!r}), drop one of them"))
    return out


# ``TrainingArguments.optim`` spellings (and a few other common ones) -> ``train.optimizer``.
OPTIMIZER_SPELLINGS = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw", "adamw_hf": "adamw", "adam": "adamw",
                       "adamw_bnb_8bit": "adamw_8bit", "adamw8bit": "adamw_8bit", "adam8bit": "adamw_8bit",
                       "bnb_adamw_8bit": "adamw_8bit", "paged_adamw8bit": "paged_adamw_8bit"}

# DeepSpeed presets: (ZeRO stage, offload).
PRESETS: dict[str, tuple[int, str]] = {"zero2-offload": (2, "optimizer"), "zero3-offload": (3, "params")}


class TrackingSection(Section):
    runs_root: str | None = None
    """Directory holding run directories; defaults to ``$CLUSTERTUNE_RUNS`` or ``./runs``."""

    trackers: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(default_factory=list)
    """Extra trackers through Accelerate; ``metrics.jsonl`` is always written. Each gets the
    run id as the run's name, the resolved recipe as its configuration, every metrics row and
    the final figures (``final/...``). W&B runs offline unless ``WANDB_MODE`` says otherwise
    (``wandb sync`` later), into the run's ``trackers/``; MLflow writes its file store there
    unless ``MLFLOW_TRACKING_URI`` names a server or database; TensorBoard's events go there too."""

    project: str = "clustertune"
    """Project name passed to the trackers (W&B's project, MLflow's experiment)."""

    tags: list[str] = Field(default_factory=list)
    """Tags for the run in the trackers (W&B tags, MLflow run tags)."""


from clustertune.recipe.rl_schema import RLSection, rl_cross_field  # noqa: E402  (after Section)
from clustertune.recipe.task_traits import TASK_TRAITS, TaskTraits  # noqa: E402


class Recipe(Section):
    name: str = "recipe"
    """Short name; used in run ids."""

    description: str = ""
    """One line saying what the recipe does."""

    task: Task = "causal_lm"
    """``causal_lm`` (next-token prediction, perplexity), ``sequence_classification``
    (text -> one of ``model.num_labels`` classes, accuracy), ``sft`` (instruction tuning on
    chat or prompt/completion examples, loss on the answers; see ``data.sft``) or ``rlhf`` (a policy tuned against
    a reward or on preference pairs, see the ``rl`` section)."""

    model: ModelSection = Field(default_factory=ModelSection)
    """What to train."""

    data: DataSection = Field(default_factory=DataSection)
    """What to train on."""

    train: TrainSection = Field(default_factory=TrainSection)
    """How to train."""

    launch: LaunchSection = Field(default_factory=LaunchSection)
    """Where to run."""

    tracking: TrackingSection = Field(default_factory=TrackingSection)
    """Where runs and metrics go."""

    rl: RLSection | None = None
    """Reward-driven (GRPO, RLOO) or preference (DPO) tuning; required for task ``rlhf``."""

    @model_validator(mode="after")
    def _cross_field(self) -> Recipe:
        problems: list[tuple[str, str]] = []
        m, d = self.model, self.data
        if self.task == "rlhf" or self.rl is not None:
            problems.extend(rl_cross_field(self))
        elif (m.name_or_path is None) == (m.config is None):
            problems.append(
                ("model", "set exactly one of model.name_or_path (pretrained) and model.config (build fresh)")
            )
        if m.revision is not None and (m.name_or_path is None or m.name_or_path.startswith(("/", "./", "../", "~", "run:"))):
            problems.append(("model.revision", "a hub revision applies to a hub name in model.name_or_path, not to "
                             "a local directory, a run or a model built from model.config: drop it"))
        if m.config is not None and m.tokenizer is None:
            problems.append(
                ("model.tokenizer", "required with model.config: a hub name, a local directory, or 'train'")
            )
        if (d.dataset is None) == (not d.train_files):
            problems.append(("data", "set exactly one of data.dataset and data.train_files"))
        if d.validation_files and not d.train_files:
            problems.append(("data.validation_files", "only valid together with data.train_files"))
        if d.streaming:
            if self.task != "causal_lm":
                problems.append(("data.streaming", "only for task causal_lm"))
            if self.train.max_steps is None:
                problems.append(("data.streaming", "needs train.max_steps (a stream's length is not known up front)"))
            if d.train_files and not d.validation_files:
                problems.append(("data.streaming", "needs data.validation_files: carving a validation split takes the whole dataset"))
            if (d.dataset or "").startswith("builtin:"):
                problems.append(("data.streaming", "builtin corpora have no validation split to stream beside; prepare them instead"))
        if self.task == "sft" and m.tokenizer == TOKENIZER_TRAIN:
            problems.append(("model.tokenizer", "task sft fine-tunes a base model with its own tokenizer; "
                             "'train' is for models trained from scratch"))
        problems.extend(classification_problems(self))
        if self.launch.nodes > 1 and self.launch.backend == "local":
            problems.append(("launch.nodes", "more than one node needs launch.backend=slurm or launch.backend=ssh"))
        if self.launch.backend == "ssh" and not self.launch.cluster:
            problems.append(("launch.cluster", "launch.backend=ssh needs a cluster: launch.cluster=NAME "
                             "(`clustertune cluster ls` lists them; `clustertune cluster add NAME HOST...` adds one)"))
        problems.extend(strategy_problems(self.train))
        problems.extend(adapter_problems(self))
        problems.extend(launch_problems(self.launch))
        if problems:
            # Raised as ValueError so pydantic reports it beside the field errors; the loader
            # turns each "key: message" line back into a Problem with that key (one per line:
            # messages hold semicolons of their own).
            raise ValueError("\n".join(f"{k}: {msg}" for k, msg in problems))
        return self

    @property
    def traits(self) -> TaskTraits:
        """What this recipe's task declares about its data and its model."""
        return TASK_TRAITS[self.task]

    @property
    def sequence_key(self) -> str:
        """The key that sets :attr:`sequence_length`."""
        return "data.block_size" if self.task == "causal_lm" else "data.max_length"

    @property
    def sequence_length(self) -> int:
        """Tokens per example the model sees: the packed block (causal LM), else the padded length."""
        return self.data.block_size if self.task == "causal_lm" else self.data.max_length

    def to_plain(self) -> dict[str, Any]:
        """The fully resolved recipe as plain data (what runs/<id>/recipe.yaml holds)."""
        return self.model_dump(mode="json")

    def explicit_plain(self) -> dict[str, Any]:
        """Only the keys set explicitly (in the YAML, an override, by a caller), as plain data: a
        recipe made again from it still knows which keys the user set, which a user's DeepSpeed
        JSON may not contradict while it decides the others (train/ds_config.py)."""
        return self.model_dump(mode="json", exclude_unset=True)
