"""Node side of one run under ``torch.distributed.run``: what each rank of a launched job does.

    python -m torch.distributed.run --standalone --nproc_per_node 2 \\
        tests/integration/strategy_driver.py RUN_DIR [CHECKPOINT_TO_RESUME]

RUN_DIR holds the resolved recipe.yaml, the tokenizer and data.json (the prepared data), so
no rank tokenizes anything.
Every rank runs clustertune's node-side ``execute``: data, model, strategy, the loop, the
final gathered save.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.paths import RunPaths
    from clustertune.train.entry import execute

    run_dir = Path(sys.argv[1])
    resume = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    # The deprecation warnings DeepSpeed triggers on every collective would bury the log.
    warnings.filterwarnings("ignore", category=FutureWarning)
    if os.environ.get("RANK", "0") == "0":
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    paths = RunPaths(run_dir)
    recipe = load_recipe(paths.recipe)
    execute(recipe, paths, resume, show_progress=False)


if __name__ == "__main__":
    main()
