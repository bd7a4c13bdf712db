"""PPO on TRL's PPOTrainer: a policy, a value model and one reward model sharing a tokenizer.

TRL's PPO differs from its GRPO/RLOO trainers in three ways that shape this module:

- it scores rollouts with a reward *model* on the policy's own token ids (no text round trip),
  through the model's backbone and ``score`` head at the last token; clustertune's reward is the
  probability of one label, so the classifier is wrapped to give exactly that as its one output;
- it trains a value model next to the policy: here a sequence classifier with a single output,
  built from ``rl.value_model`` (default: the policy) with a fresh value head;
- its ``train()`` always starts at step 0 and takes no checkpoint, so a PPO run cannot resume.

It lives in ``trl.experimental.ppo`` up to TRL 1.12; TRL 1.13 removed it.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from clustertune.errors import RunError, UserError
from clustertune.models.build import announced_load
from clustertune.recipe.rl_schema import PPO_ONE_PROCESS, PPO_TRL
from clustertune.recipe.rl_recipe import RLRecipe
from clustertune.recipe.schema import Recipe

DEFAULT_PPO_EPOCHS = 4
NO_RESUME = ("TRL's PPOTrainer cannot resume from a checkpoint (its train() always starts at step 0 and "
             "takes no checkpoint)")


def ppo_classes() -> tuple[Any, Any]:
    """(PPOConfig, PPOTrainer) from the installed TRL, or a UserError naming the TRL that has them."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # the recipe chose PPO knowingly
    try:
        from trl.experimental.ppo import PPOConfig, PPOTrainer
    except ImportError as exc:
        import trl

        raise UserError(
            f"rl.algorithm: ppo needs TRL's PPOTrainer, which TRL {trl.__version__} does not have "
            f"(TRL 1.13 removed it; 1.12 is the last release with trl.experimental.ppo). "
            f"Install `{PPO_TRL}` (clustertune's own pin) or use algorithm: grpo with the same reward model"
        ) from exc
    return PPOConfig, PPOTrainer


def refuse_resume(checkpoint: str) -> RunError:
    return RunError(f"{NO_RESUME}. Start a new run; to continue from the kept weights, set "
                    f"rl.policy to the checkpoint directory {checkpoint}")


class LabelProbability(torch.nn.Module):
    """A sequence classifier whose one output is P(label): what TRL's PPO reads as the reward.

    TRL calls ``getattr(model, model.base_model_prefix)`` for the backbone and ``model.score``
    on its last hidden states, so both are exposed under those names.
    """

    def __init__(self, classifier: Any, index: int):
        super().__init__()
        if not hasattr(classifier, "score"):
            raise UserError(f"rl.rewards.0.model: TRL's PPO needs a classifier with a `score` head on a decoder "
                            f"backbone (GPT-2, Llama, ...), not a {type(classifier).__name__}; "
                            "train the reward model from the policy (model.name_or_path: the policy directory)")
        self.base_model_prefix = classifier.base_model_prefix
        self.add_module(self.base_model_prefix, getattr(classifier, self.base_model_prefix))
        self.head = classifier.score
        self.index = index
        self.config = classifier.config

    def score(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden).float().softmax(-1)[..., self.index:self.index + 1]


def value_model(path: str, pad_token_id: int | None) -> Any:
    """A one-output sequence classifier on the backbone at ``path`` (its head starts fresh)."""
    import logging

    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)  # "newly initialized: score.weight" is the point here
    try:
        with announced_load(path, "rl value model"):
            model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, ignore_mismatched_sizes=True)
    finally:
        hf_logging.set_verbosity(level)
    if model.config.pad_token_id is None:
        model.config.pad_token_id = pad_token_id
    return model


def ppo_config(recipe: RLRecipe, common: dict[str, Any]) -> Any:
    """TRL's PPOConfig: steps become episodes (prompts rolled out), beta becomes kl_coef."""
    PPOConfig, _ = ppo_classes()
    rl, t = recipe.rl, recipe.train
    args = {k: v for k, v in common.items() if k not in ("beta", "max_steps")}
    episodes = t.max_steps * t.batch_size * t.gradient_accumulation_steps if t.max_steps else None  # one process
    return PPOConfig(
        **args, total_episodes=episodes, response_length=rl.max_new_tokens, temperature=rl.temperature,
        kl_coef=rl.kl_beta(), num_ppo_epochs=rl.ppo_epochs or DEFAULT_PPO_EPOCHS, num_mini_batches=1,
        num_sample_generations=0,  # samples.jsonl and the evaluations cover what its tables would show
        stop_token=None, missing_eos_penalty=None,
    )


def tokenized_prompts(ds: Any, tok: Any) -> Any:
    """PPO reads prompts as token ids (its collator left-pads them for generation)."""
    return ds.map(lambda row: {"input_ids": tok(row["prompt"], add_special_tokens=False)["input_ids"]},
                  remove_columns=ds.column_names)


def make_ppo_trainer(recipe: Recipe, policy: Any, ref: Any, value_path: str, reward: Any, args: Any,
                     train_ds: Any, tok: Any, callback: Any) -> Any:
    """PPOTrainer for the recipe; ``reward`` is the run's one ModelReward (its classifier is reused)."""
    _, PPOTrainer = ppo_classes()
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:  # e.g. one rank per GPU chosen on a multi-GPU host
        raise UserError(f"rl.algorithm: {PPO_ONE_PROCESS}; set launch.procs_per_node: 1 or use grpo")
    tok.padding_side = "left"  # queries are generated from: decoder-only models continue at the end
    prompts = tokenized_prompts(train_ds, tok)
    return PPOTrainer(
        args=args, processing_class=tok, model=policy, ref_model=ref,
        reward_model=LabelProbability(reward.model, reward.index),
        value_model=value_model(value_path, tok.pad_token_id),
        train_dataset=prompts, eval_dataset=prompts.select(range(min(8, len(prompts)))), callbacks=[callback],
    )
