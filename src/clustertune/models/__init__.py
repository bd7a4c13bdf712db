"""Models and tokenizers: hub names, local directories, or built on the fly; their heads
(``heads.py``) follow a task's declared traits. Imports the host layer, runs, recipe and below;
never data, tasks, train or anything above."""

from clustertune.models.build import build_model, check_sequence_fits, resolve_config
from clustertune.models.tokenizer import load_tokenizer, train_bpe

__all__ = ["build_model", "check_sequence_fits", "load_tokenizer", "resolve_config", "train_bpe"]
