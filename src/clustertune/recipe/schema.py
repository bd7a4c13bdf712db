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

from clustertune.recipe.adapter_schema import adapter_problems
from clustertune.recipe.compute_checks import compute_problems
from clustertune.recipe.data_schema import DataSection
from clustertune.recipe.launch_checks import launch_problems
from clustertune.recipe.launch_schema import LaunchSection
from clustertune.recipe.model_schema import ModelSection
from clustertune.recipe.run_refs import is_run_ref
from clustertune.recipe.section import Section

Task = Literal["causal_lm", "sequence_classification", "sft", "rlhf", "reward_model"]
TASKS: tuple[str, ...] = ("causal_lm", "sequence_classification", "sft", "rlhf", "reward_model")
TOKENIZER_TRAIN = "train"


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

    fused_loss: bool = False
    """SFT (the loss on trained tokens only): compute the output layer and the cross-entropy
    together, a chunk of rows at a time, so the logits of the trained positions never exist
    whole (Liger Kernel's fused kernel on a GPU where it is installed, a chunked torch version
    elsewhere). The same loss and gradients (exact against the unfused loss in fp32); less peak
    memory with a large vocabulary (``benchmarks/fused_loss.py``). A model whose output layer is
    not a plain Linear (an adapter wrapped around it) keeps the unfused loss."""

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

    group_by_length: bool | None = None
    """Put rows of similar length in the same batch (chat SFT without packing, reward pairs: each
    batch is cut to its longest row, so less padding is computed). The epoch's shuffled order is sorted by
    length, longest first, within each run of 1,024 samples; which samples an epoch holds does
    not change, only their order (Trainer's ``group_by_length``). Unset: on wherever rows differ
    in length; ``false`` keeps the shuffled order."""

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

    compile_mode: Literal["default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune"] = "default"
    """How a compiled model compiles: ``default``; ``max-autotune-no-cudagraphs`` (inductor times
    several kernels for each matrix multiply and keeps the fastest: minutes more at the first
    step); ``reduce-overhead`` (CUDA graphs: a step's kernels replayed as one recorded graph,
    without the launch cost that bounds a small model on a fast GPU); ``max-autotune`` (both).
    CUDA graphs need batches of one shape (causal LM blocks, labelled texts) and parameters that
    stay in place (``strategy: ddp``). A mode that fails to compile falls back to ``default``,
    then to eager mode, and the log says so."""

    fp8: bool = False
    """Linear layers multiply in FP8 (torchao's float8 training, one dynamic scale per tensor) on
    GPUs with FP8 tensor cores (compute capability 8.9+: H100, H200, L40S, RTX 4090); the weights
    and the rest stay in bf16 autocast over fp32. Pays off from about 1B parameters (the ``fp8``
    extra: torchao). Full fine-tuning with ``ddp`` or ``fsdp`` and bf16; run.json records it."""

    fused_adamw: bool | None = None
    """Fused AdamW kernel (one kernel for all parameters): on by default on a GPU."""

    fused_gelu: bool = True
    """The tanh GELU that GPT-2-family models write as seven element-wise operations
    (``gelu_new``, ``gelu_fast``) runs as torch's one-kernel ``GELU(approximate="tanh")``: the
    same function (within 5e-7 in fp32), an eighth to a fifth of a CPU step less for GPT-2
    shapes. The saved config keeps its activation's name."""

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


def warmup_steps(t: TrainSection, total_steps: int) -> int:
    """``train.warmup_steps``, else ``train.warmup_ratio`` of the run's optimizer steps, rounded
    up (as transformers' Trainer rounds a ratio)."""
    return t.warmup_steps or math.ceil(t.warmup_ratio * total_steps)


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
    chat or prompt/completion examples, loss on the answers; see ``data.sft``), ``rlhf`` (a policy tuned against
    a reward or on preference pairs, see the ``rl`` section) or ``reward_model`` (a scalar score
    trained on preference pairs, ``data.prompt_column``/``chosen_column``/``rejected_column``, with
    the Bradley-Terry loss; evaluations report pairwise accuracy; usable as ``rl.rewards[].model``)."""

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
        if m.revision is not None and (m.name_or_path is None or is_run_ref(m.name_or_path)
                                   or m.name_or_path.startswith(("/", "./", "../", "~"))):
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
        if self.task in ("sft", "reward_model") and m.tokenizer == TOKENIZER_TRAIN:
            problems.append(("model.tokenizer", f"task {self.task} fine-tunes a base model with its own tokenizer; "
                             "'train' is for models trained from scratch"))
        problems.extend(classification_problems(self))
        if self.launch.nodes > 1 and self.launch.backend == "local":
            problems.append(("launch.nodes", "more than one node needs launch.backend=slurm or launch.backend=ssh"))
        if self.launch.backend == "ssh" and not self.launch.cluster:
            problems.append(("launch.cluster", "launch.backend=ssh needs a cluster: launch.cluster=NAME "
                             "(`clustertune cluster ls` lists them; `clustertune cluster add NAME HOST...` adds one)"))
        problems.extend(strategy_problems(self.train))
        problems.extend(compute_problems(self))
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
        JSON may not contradict while it decides the others (recipe/ds_config.py)."""
        return self.model_dump(mode="json", exclude_unset=True)
