"""EleutherAI's lm-eval harness on a loaded model: the ``lm-eval`` extra.

The model and tokenizer objects already loaded (on their device, in their dtype) are handed to
lm-eval's ``HFLM`` wrapper, so an adapter run is evaluated merged onto its base and nothing is
loaded twice. Tasks come from lm-eval's registry plus ``--include-path`` (a directory of task
YAML files). Tasks whose data is local (``dataset_path: json`` with ``data_files``) and whose
metrics lm-eval implements itself (``acc``, ``acc_norm``, ``exact_match``...) run offline; a
metric lm-eval does not register is fetched by ``evaluate.load``, from the Hugging Face Hub, and
hub datasets need internet (or their cached copies) too.
"""

from __future__ import annotations

import difflib
import logging
from pathlib import Path
from typing import Any

from clustertune.errors import EvalError
from clustertune.extras import install_hint
from clustertune.use.load import Loaded

log = logging.getLogger("clustertune")

def require_lm_eval() -> Any:
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM  # noqa: F401  (its [hf] extra: transformers, peft...)
    except ImportError as exc:
        raise EvalError(f"--tasks needs EleutherAI's lm-eval harness, which is not installed ({exc}); "
                        f"install it with `{install_hint('lm-eval')}`") from None
    return lm_eval


def check_tasks(tasks: list[str], include_path: str | None) -> Any:
    """lm-eval's TaskManager over its registry and ``include_path``; EvalError for an unknown
    task (with the nearest names) or a missing directory."""
    if not tasks or any(not t.strip() for t in tasks):
        raise EvalError("--tasks: name one or more lm-eval tasks, comma-separated (e.g. --tasks hellaswag,arc_easy)")
    if include_path is not None and not Path(include_path).expanduser().is_dir():
        raise EvalError(f"--include-path {include_path}: no such directory; give the directory that holds "
                        "your task YAML files")
    require_lm_eval()
    from lm_eval.tasks import TaskManager

    local = str(Path(include_path).expanduser()) if include_path else None
    if local is not None:
        # Your own tasks alone first: indexing lm-eval's whole registry (thousands of YAML
        # files) takes seconds, and is needed only for the names not found here.
        manager = TaskManager(include_path=local, include_defaults=False)
        if all(t in set(manager.all_tasks) for t in tasks):
            return manager
    manager = TaskManager(include_path=local)
    known = set(manager.all_tasks)
    unknown = [t for t in tasks if t not in known]
    if unknown:
        hints = []
        for t in unknown:
            close = difflib.get_close_matches(t, known, n=3)
            hints.append(f"{t!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        where = f"in lm-eval's registry or {include_path}" if include_path else "in lm-eval's registry"
        raise EvalError(f"--tasks: unknown task {', '.join(hints)} {where}; `lm-eval ls tasks` lists them, and "
                        "tasks defined in your own YAML files need --include-path DIR")
    return manager


def _headline(results: dict[str, Any]) -> dict[str, float]:
    """``task/metric`` -> value for every number lm-eval reports (``acc,none`` -> ``acc``),
    standard errors left out."""
    out: dict[str, float] = {}
    for task, row in results.items():
        for key, value in row.items():
            metric, _, filt = key.partition(",")
            if "stderr" in metric or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            out[f"{task}/{metric}" + (f"[{filt}]" if filt and filt != "none" else "")] = float(value)
    return out


def run_tasks(loaded: Loaded, tasks: list[str], manager: Any, *, limit: float | None = None,
              num_fewshot: int | None = None, batch_size: int = 1) -> dict[str, Any]:
    """Run ``tasks``; the headline metrics, lm-eval's per-task results and versions."""
    lm_eval = require_lm_eval()
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=loaded.model, tokenizer=loaded.tokenizer, batch_size=batch_size, device=loaded.device)
    try:
        out = lm_eval.simple_evaluate(model=lm, tasks=list(tasks), task_manager=manager, limit=limit,
                                      num_fewshot=num_fewshot, log_samples=False)
    except (FileNotFoundError, ConnectionError, OSError) as exc:
        raise EvalError(f"lm-eval could not load what its tasks need ({exc}); hub datasets and metrics need "
                        "internet (or their cached copies): local tasks should name local data_files "
                        "and metrics lm-eval implements itself (acc, exact_match)") from exc
    if not out:
        raise EvalError("lm-eval returned no results (on a non-zero rank?)")
    return {"metrics": _headline(out.get("results") or {}), "results": out.get("results"),
            "versions": out.get("versions"), "n-samples": out.get("n-samples"),
            "lm_eval_version": getattr(lm_eval, "__version__", None)}
