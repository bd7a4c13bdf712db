"""The recipe's ``data`` section: where the examples come from (the builtin corpus, local files, a
``save_to_disk`` directory or the hub), their columns, blocks and lengths, the held-out split, and
the SFT settings under ``data.sft``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from clustertune.recipe.section import Section
from clustertune.recipe.sft_schema import SFTSection


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

    prompt_column: str = "prompt"
    """``reward_model``: column holding each pair's prompt (may be empty: the texts alone)."""

    chosen_column: str = "chosen"
    """``reward_model``: column holding the preferred completion of the prompt."""

    rejected_column: str = "rejected"
    """``reward_model``: column holding the completion preferred less."""

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
