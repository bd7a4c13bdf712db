"""The ``rl`` section of a recipe: reward-driven (GRPO, RLOO) and preference (DPO) tuning.

Kept beside schema.py so the supervised sections stay readable; the Recipe model imports it.
Checks here need no network and no files; checks that do (the policy exists, a reward function
imports, a reward model has the named label, the data has the columns) run in the preflight of
``clustertune run`` (clustertune.train.rl.checks).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from clustertune.recipe.run_refs import RUN_PREFIX
from clustertune.recipe.section import Section

# TRL's PPOTrainer lives in trl.experimental.ppo up to TRL 1.12 (1.13 removed it); pyproject pins
# that range, and the runner says so if another TRL is installed.
PPO_TRL = "trl>=1.12,<1.13"
# Measured with TRL 1.12 under torchrun (2 CPU ranks): saving its DDP-wrapped policy-and-value
# model fails safetensors' shared-tensor check (and its model card reads a config DDP lacks).
PPO_ONE_PROCESS = ("TRL 1.12's PPOTrainer runs on one process only (under several, saving its "
                   "wrapped policy and value model fails)")


class RewardSpec(Section):
    function: str | None = None
    """A Python reward function as ``module:attribute`` (``clustertune.rewards:char_fraction``,
    ``my_rewards:score``). It is called as ``fn(prompts=[...], completions=[...], **kwargs)`` (TRL's
    way) or, when its signature takes ``samples``, as TRLX's ``reward_fn(samples=[...], **kwargs)``
    with each sample the prompt followed by its completion; it returns one float per completion.
    Modules are looked up on ``sys.path`` plus the current directory. Exactly one of ``function``
    and ``model``."""

    model: str | None = None
    """A sequence-classification model directory (``save_pretrained``, e.g. the ``model/`` of a
    clustertune classification run, or ``run:<run-id>``) or hub name; the reward is the
    probability of ``label`` for prompt + completion, or a reward model's score (``task:
    reward_model``, no ``label``)."""

    label: str | int | None = None
    """With ``model``: the label whose probability is the reward, by name (``config.id2label``)
    or by index; left out for a reward model (one output: a run of ``task: reward_model``),
    whose score is the reward."""

    weight: float = 1.0
    """Weight of this reward in the sum when several are given."""

    kwargs: dict[str, Any] = Field(default_factory=dict)
    """With ``function``: extra keyword arguments, e.g. ``{chars: e}``."""


class RLSection(Section):
    algorithm: Literal["grpo", "rloo", "ppo", "dpo", "kto"] = "grpo"
    """``grpo`` (group-relative policy optimisation against rewards), ``rloo`` (REINFORCE
    leave-one-out, same inputs), ``ppo`` (proximal policy optimisation with a value model,
    against one reward model), ``dpo`` (direct preference optimisation on pairs) or ``kto``
    (Kahneman-Tversky optimisation: completions marked desirable or not, one at a time; pairs
    are split into one of each)."""

    policy: str = ""
    """The model to tune: a hub name, a local ``save_pretrained`` directory, or ``run:<run-id>``
    for the final model of an earlier clustertune run (a prefix such as ``run:quickstart`` takes
    the newest completed run whose id starts with it)."""

    reference: str | None = None
    """Reference model for the KL term (same forms as ``policy``); defaults to the policy's own
    starting weights. It must share the policy's tokenizer."""

    rewards: list[RewardSpec] = Field(default_factory=list)
    """GRPO/RLOO: reward functions and/or reward models, summed with their weights. PPO: exactly
    one reward model that shares the policy's tokenizer (TRL's PPO scores the policy's token ids
    with it)."""

    value_model: str | None = None
    """PPO: starting weights of the value model (same forms as ``policy``; a causal LM or a
    sequence classifier sharing the policy's tokenizer); its backbone gets a fresh one-output
    value head. Defaults to the policy."""

    ppo_epochs: int | None = Field(default=None, ge=1)
    """PPO: optimisation passes over each batch of rollouts (default 4)."""

    prompt_column: str = "prompt"
    """Column of ``data`` holding the prompts (GRPO/RLOO) or the shared prompt of a pair (DPO)."""

    chosen_column: str = "chosen"
    """DPO: column holding the preferred completion."""

    rejected_column: str = "rejected"
    """DPO: column holding the dispreferred completion."""

    completion_column: str = "completion"
    """KTO on unpaired data (no ``chosen_column`` in it): column holding the completion."""

    label_column: str = "label"
    """KTO on unpaired data: column saying whether the completion is desirable (true/false, 1/0)."""

    desirable_weight: float = Field(default=1.0, gt=0.0)
    """KTO: weight of the desirable completions' loss (raise it when they are the fewer)."""

    undesirable_weight: float = Field(default=1.0, gt=0.0)
    """KTO: weight of the undesirable completions' loss."""

    eval_prompts: list[str] = Field(default_factory=list)
    """Prompts for measuring the mean reward before, during and after training; defaults to the
    validation split's prompts (``data.max_eval_samples`` caps them)."""

    eval_repeats: int = Field(default=1, ge=1)
    """Each evaluation prompt is sampled this many times (``eval_prompts: ["In my opinion"]``
    with ``eval_repeats: 256`` measures one prompt over 256 samples)."""

    max_new_tokens: int = Field(default=32, ge=1)
    """Tokens generated per completion."""

    max_prompt_tokens: int = Field(default=64, ge=1)
    """Prompts are cut to their first N tokens (DPO: prompt + completion to twice this)."""

    temperature: float = Field(default=1.0, gt=0.0)
    """Sampling temperature for training and evaluation generations."""

    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    """Nucleus sampling threshold."""

    num_generations: int = Field(default=4, ge=2)
    """Completions sampled per prompt; GRPO/RLOO compare them with each other. The number of
    completions per step (``train.batch_size``) must be a multiple of it."""

    beta: float | None = Field(default=None, ge=0.0)
    """KL coefficient against the reference model (GRPO/RLOO, default 0.04) or DPO's beta
    (default 0.1)."""

    sample_every: int | None = Field(default=None, ge=1)
    """Write sample generations (with their rewards) to ``samples.jsonl`` every N steps;
    defaults to ``train.log_every``."""

    num_samples: int = Field(default=4, ge=1)
    """Prompts sampled each time samples are written."""

    @property
    def preference(self) -> bool:
        """Learns from preference data (pairs, or completions marked desirable), not rewards."""
        return self.algorithm in ("dpo", "kto")

    def kl_beta(self) -> float:
        if self.beta is not None:
            return self.beta
        return 0.1 if self.preference else 0.04


def rl_cross_field(recipe: Any) -> list[tuple[str, str]]:
    """Problems between ``rl`` and the rest of the recipe, as (key, message) pairs."""
    problems: list[tuple[str, str]] = []
    rl, m = recipe.rl, recipe.model
    if recipe.task != "rlhf":
        return [("rl", f"only valid with task: rlhf (this recipe's task is {recipe.task})")]
    if rl is None:
        return [("rl", "required for task rlhf: at least rl.policy and rl.algorithm")]
    if m.name_or_path is not None or m.config is not None:
        problems.append(("model", "for task rlhf the model to tune is rl.policy: leave model.name_or_path and model.config unset"))
    if not rl.policy:
        problems.append(("rl.policy", "required: a hub name, a save_pretrained directory or run:<run-id>"))
    elif rl.policy == RUN_PREFIX:
        problems.append(("rl.policy", "run: needs a run id after it, e.g. run:quickstart-20260101-120000-ab12"))
    if rl.algorithm != "kto":
        for key in ("desirable_weight", "undesirable_weight"):
            if getattr(rl, key) != 1.0:
                problems.append((f"rl.{key}", f"only used by algorithm: kto (this recipe's algorithm is {rl.algorithm})"))
    if rl.algorithm != "ppo":
        for key, value in (("rl.value_model", rl.value_model), ("rl.ppo_epochs", rl.ppo_epochs)):
            if value is not None:
                problems.append((key, f"only used by algorithm: ppo (this recipe's algorithm is {rl.algorithm})"))
    if rl.algorithm == "ppo":
        problems.extend(_ppo_problems(rl))
        ln = recipe.launch
        if ln.nodes > 1 or (ln.procs_per_node or 1) > 1:
            problems.append(("launch.procs_per_node", f"{PPO_ONE_PROCESS}: set launch.nodes and launch.procs_per_node "
                             "to 1, or use grpo, which runs on several processes"))
    elif rl.preference:
        if rl.rewards:
            problems.append(("rl.rewards", f"{rl.algorithm.upper()} learns from preference data, not rewards: remove "
                             "rl.rewards or use grpo"))
        cols = [rl.prompt_column, rl.chosen_column, rl.rejected_column]
        if len(set(cols)) != 3:
            problems.append(("rl.chosen_column", f"prompt, chosen and rejected columns must differ, got {cols}"))
    else:
        if not rl.rewards:
            problems.append(("rl.rewards", f"{rl.algorithm} needs at least one reward: {{function: module:attr}} or {{model: DIR, label: NAME}}"))
        for i, r in enumerate(rl.rewards):
            key = f"rl.rewards.{i}"
            if (r.function is None) == (r.model is None):
                problems.append((key, "set exactly one of function (module:attr) and model (a classifier directory)"))
            if r.function is not None and (":" not in r.function or not all(r.function.split(":", 1))):
                problems.append((f"{key}.function", f"{r.function!r} must look like module:attribute, e.g. clustertune.rewards:char_fraction"))
            if r.model is None and r.label is not None:
                problems.append((f"{key}.label", "only valid with model"))
            if r.function is None and r.kwargs:
                problems.append((f"{key}.kwargs", "only valid with function"))
        t = recipe.train
        if t.batch_size % rl.num_generations:
            problems.append(("train.batch_size", f"{t.batch_size} completions per step is not a multiple of "
                             f"rl.num_generations={rl.num_generations}, so set train.batch_size to a multiple of it"))
    return problems


def _ppo_problems(rl: RLSection) -> list[tuple[str, str]]:
    """TRL's PPO takes one reward model (no reward functions) and samples with plain temperature."""
    if not rl.rewards:
        return [("rl.rewards", "ppo needs one reward model: [{model: DIR, label: NAME}] (a sequence classifier "
                 "sharing the policy's tokenizer)")]
    problems: list[tuple[str, str]] = []
    functions = [i for i, r in enumerate(rl.rewards) if r.function is not None]
    if functions:
        # TRLX's reward_fn(samples) -> scores is a reward function: show the same rewards where they run.
        problems.append((f"rl.rewards.{functions[0]}.function",
                         "TRL's PPO takes a reward model, not a reward function (a TRLX reward_fn is one); the "
                         f"same rewards run under GRPO or RLOO, several processes too: {same_rewards_elsewhere(rl.rewards)} "
                         "(or algorithm: rloo), or keep algorithm: ppo with one reward model: rewards: "
                         "[{model: DIR, label: NAME}]"))
        return problems + _ppo_sampling_problems(rl)
    if len(rl.rewards) > 1:
        problems.append(("rl.rewards", f"ppo takes exactly one reward model, got {len(rl.rewards)}, "
                         "so use grpo or rloo to combine several rewards"))
    r = rl.rewards[0]
    if r.label is None:
        problems.append(("rl.rewards.0.label", "required with model: the label whose probability is the reward"))
    if r.weight != 1.0:
        problems.append(("rl.rewards.0.weight", "ppo has a single reward: leave weight unset"))
    return problems + _ppo_sampling_problems(rl)


def _ppo_sampling_problems(rl: RLSection) -> list[tuple[str, str]]:
    if rl.top_p != 1.0:
        return [("rl.top_p", "TRL's PPO samples from the full distribution (top_p 1.0), "
                 "so leave rl.top_p unset or use grpo")]
    return []


def same_rewards_elsewhere(rewards: list[RewardSpec]) -> str:
    """The recipe's ``rl`` lines that run ``rewards`` under GRPO, in YAML's one-line form."""
    import yaml

    written = [r.model_dump(exclude_defaults=True) for r in rewards]
    section = {"rl": {"algorithm": "grpo", "rewards": written}}
    return yaml.safe_dump(section, default_flow_style=True, sort_keys=False, width=1 << 16).strip()


def model_refs(rl: Any) -> list[tuple[str, str]]:
    """(key, reference) for every model the ``rl`` section names."""
    refs = [("rl.policy", rl.policy), ("rl.reference", rl.reference), ("rl.value_model", rl.value_model)]
    refs += [(f"rl.rewards.{i}.model", r.model) for i, r in enumerate(rl.rewards)]
    return [(k, v) for k, v in refs if v]
