"""The names people type from Hugging Face ``TrainingArguments`` and the example scripts'
arguments (``run_clm.py``, ``run_glue.py``), and from Axolotl, PEFT, LLaMA-Factory and TRL, and
the recipe key that does the same here.

A misspelt key gets a did-you-mean from the schema's own names; a Trainer name gets the
recipe key it maps to, wherever in the recipe (or on the command line) it was written.
"""

from __future__ import annotations

import difflib

# Trainer / script argument -> (recipe key, how the value is written when it differs).
TRAINER_NAMES: dict[str, tuple[str, str | None]] = {
    # TrainingArguments
    "learning_rate": ("train.lr", None),
    "per_device_train_batch_size": ("train.batch_size", "per device, as in TrainingArguments"),
    "per_device_eval_batch_size": ("train.eval_batch_size", None),
    "train_batch_size": ("train.batch_size", "per device"),
    "gradient_accumulation_steps": ("train.gradient_accumulation_steps", None),
    "num_train_epochs": ("train.epochs", None),
    "max_steps": ("train.max_steps", None),
    "warmup_steps": ("train.warmup_steps", None),
    "warmup_ratio": ("train.warmup_ratio", None),
    "weight_decay": ("train.weight_decay", None),
    "adam_beta1": ("train.adam_beta1", None),
    "adam_beta2": ("train.adam_beta2", None),
    "adam_epsilon": ("train.adam_eps", None),
    "max_grad_norm": ("train.max_grad_norm", None),
    "group_by_length": ("train.group_by_length", None),
    "train_sampling_strategy": ("train.group_by_length", "true for group_by_length, else leave it out"),
    "lr_scheduler_type": ("train.lr_scheduler", "linear, cosine or constant"),
    "optim": ("train.optimizer", "adamw, adafactor, sgd, adamw_8bit or paged_adamw_8bit"),
    "logging_steps": ("train.log_every", None),
    "eval_steps": ("train.eval_every", None),
    "save_steps": ("train.save_every", None),
    "eval_strategy": ("train.eval_every", "a number of steps"),
    "evaluation_strategy": ("train.eval_every", "a number of steps"),
    "save_strategy": ("train.save_every", "a number of steps"),
    "logging_strategy": ("train.log_every", "a number of steps"),
    "save_total_limit": ("train.keep_last", None),
    "seed": ("train.seed", None),
    "data_seed": ("train.seed", "one seed orders the data; data.split_seed moves the validation carve-out"),
    "bf16": ("train.precision", "train.precision: bf16"),
    "fp16": ("train.precision", "train.precision: fp16"),
    "tf32": ("train.tf32", None),
    "gradient_checkpointing": ("train.gradient_checkpointing", None),
    "torch_compile": ("train.compile", None),
    "use_cpu": ("train.device", "train.device: cpu"),
    "no_cuda": ("train.device", "train.device: cpu"),
    "deepspeed": ("train.deepspeed_config", "the path of your DeepSpeed JSON; it implies train.strategy: deepspeed"),
    "fsdp": ("train.strategy", "train.strategy: fsdp"),
    "dataloader_num_workers": ("data.workers", "workers that tokenize when the data is prepared"),
    "output_dir": ("tracking.runs_root", "each run gets its own directory under it"),
    "logging_dir": ("tracking.runs_root", "metrics are written into each run's directory"),
    "report_to": ("tracking.trackers", "a list: tensorboard, wandb, mlflow"),
    "run_name": ("name", None),
    # the example scripts' model and data arguments
    "model_name_or_path": ("model.name_or_path", None),
    "model_name": ("model.name_or_path", None),
    "config_name": ("model.config", None),
    "tokenizer_name": ("model.tokenizer", None),
    "dataset_name": ("data.dataset", None),
    "dataset_config_name": ("data.dataset_config", None),
    "train_file": ("data.train_files", "a list of files"),
    "validation_file": ("data.validation_files", "a list of files"),
    "validation_split_percentage": ("data.validation_fraction", "a fraction: 5 percent is 0.05"),
    "max_seq_length": ("data.max_length", None),
    "max_train_samples": ("data.max_train_samples", None),
    "max_eval_samples": ("data.max_eval_samples", None),
    "preprocessing_num_workers": ("data.workers", None),
    "text_column_name": ("data.text_column", None),
    "label_column_name": ("data.label_column", None),
    "block_size": ("data.block_size", None),
    "num_labels": ("model.num_labels", None),
}


# The names of the fine-tuning tools people come from (Axolotl's YAML, PEFT's LoraConfig,
# LLaMA-Factory's arguments, TRL's SFTConfig) -> (recipe key, how the value is written, whose).
PEER_NAMES: dict[str, tuple[str, str | None, str]] = {
    "sequence_len": ("data.max_length", "data.block_size for causal_lm", "Axolotl"),
    "micro_batch_size": ("train.batch_size", "per device", "Axolotl"),
    "optimizer": ("train.optimizer", "adamw_bnb_8bit and paged_adamw_8bit are read as they are", "Axolotl"),
    "num_epochs": ("train.epochs", None, "Axolotl"),
    "base_model": ("model.name_or_path", None, "Axolotl"),
    "val_set_size": ("data.validation_fraction", "a fraction", "Axolotl"),
    "sample_packing": ("data.sft.packing", None, "Axolotl"),
    "load_in_4bit": ("model.adapter.type", "model.adapter.type: qlora", "Axolotl"),
    "lora_r": ("model.adapter.rank", None, "Axolotl"),
    "lora_alpha": ("model.adapter.alpha", None, "Axolotl and PEFT"),
    "lora_dropout": ("model.adapter.dropout", None, "Axolotl and PEFT"),
    "lora_target_modules": ("model.adapter.target_modules", None, "Axolotl"),
    "r": ("model.adapter.rank", None, "PEFT"),
    "use_dora": ("model.adapter.type", "model.adapter.type: dora", "PEFT"),
    "lora_rank": ("model.adapter.rank", None, "LLaMA-Factory"),
    "lora_target": ("model.adapter.target_modules", "a list of module names", "LLaMA-Factory"),
    "cutoff_len": ("data.max_length", None, "LLaMA-Factory"),
    "finetuning_type": ("model.adapter.type", "lora, dora or qlora; full fine-tuning: no model.adapter",
                        "LLaMA-Factory"),
    "template": ("data.sft.chat_template", "chatml, llama3 or a Jinja file", "LLaMA-Factory"),
    "dataset_text_field": ("data.text_column", None, "TRL"),
}


def trainer_hint(name: str, fuzzy: bool = False) -> str | None:
    """``did you mean 'train.lr'?`` for a Trainer name (``fuzzy``: or a near miss of one), or None."""
    if fuzzy and name not in TRAINER_NAMES:
        name = next(iter(difflib.get_close_matches(name, list(TRAINER_NAMES), n=1, cutoff=0.85)), name)
    if name in TRAINER_NAMES:
        (key, how), whose = TRAINER_NAMES[name], "Trainer"
    elif name in PEER_NAMES:
        key, how, whose = PEER_NAMES[name]
    else:
        return None
    return f"did you mean '{key}'? ({name} in {whose} terms" + (f"; {how})" if how else ")")
