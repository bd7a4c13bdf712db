"""One command that checks clustertune's GPU paths on a node with 1-8 GPUs; prints a pass/fail table.

    python benchmarks/gpu_check.py [--gpus N] [--only ddp,fsdp,...] [--out DIR] [--json FILE]

Needs torch, transformers and accelerate (and this checkout, `pip install -e .`); without
DeepSpeed the ZeRO cases are skipped with a note. Nothing is downloaded: the model is a GPT-2
built from a config, the tokenizer is trained on the builtin corpus. Checks, each a row:

- devices: N ranks under torchrun land on N distinct GPUs, with an NCCL process group;
- precision auto: what ``train.precision: auto`` picks on this GPU (bf16 where it is native);
- for each strategy (ddp, fsdp, fsdp+offload, zero2, zero3), in bf16 with torch.compile,
  gradient accumulation 2, clipping and an evaluation set that does not split evenly over the
  ranks: the loss curve matches a one-GPU fp32 run within a tolerance; a second job resumes
  from the mid-run checkpoint and ends on the same evaluation loss; the gathered final model
  is plain ``save_pretrained`` output in fp32 and gives that loss again; recompiles and graph
  breaks under compile are counted;
- FSDP with offload on one GPU without a launcher (a process group of one) against the reference;
- estimate-memory against the measured peak device memory, for three model sizes.

``--cpu`` runs the same harness on CPU ranks (gloo, fp32, no compile): a check of the check.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

STEPS, SAVE_AT = 20, 10
LOSS_TOL_BF16, LOSS_TOL_FP32 = 0.05, 2e-3  # per-step |loss - one-GPU fp32 loss|
CASES: dict[str, dict[str, Any]] = {
    "ddp": {"strategy": "ddp"},
    "fsdp": {"strategy": "fsdp"},
    "fsdp+offload": {"strategy": "fsdp", "offload": "params"},
    "zero2": {"strategy": "deepspeed", "zero_stage": 2},
    "zero3": {"strategy": "deepspeed", "zero_stage": 3},
}
SIZES = ((12, 768), (24, 1024), (24, 2048))  # about 124M, 350M, 1.3B parameters (layers x width)


SMOKE = False  # --smoke: a 2-layer width-64 model, 6 steps and 16 evaluation blocks (CI runs the harness so)



def cause(tail: str) -> str:
    """The line of a failed launch's output that says why: the last exception line (torchrun
    ends its report with a rule of '=' signs, which says nothing), else the last line."""
    lines = [x.strip() for x in tail.strip().splitlines() if x.strip()]
    for line in reversed(lines):
        if re.search(r"\b\w*(Error|Exception)\b: ", line):
            return re.sub(r"^\[rank\d+\]:\s*", "", line)[:200]
    return lines[-1][:200] if lines else "(no output)"

def base_recipe(cpu: bool) -> dict[str, Any]:
    r = {
        "name": "gpu-check", "task": "causal_lm",
        "model": {"config": "gpt2", "tokenizer": "train", "tokenizer_vocab_size": 4096,
                  "config_overrides": {"n_layer": 4, "n_embd": 256, "n_head": 4, "n_positions": 128,
                                       "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}},
        # 101 evaluation blocks: no world size from 2 to 8 splits them evenly at batch 4.
        "data": {"dataset": "builtin:pydoc", "block_size": 128, "max_eval_samples": 101},
        "train": {"batch_size": 4, "gradient_accumulation_steps": 2, "max_steps": STEPS, "save_every": SAVE_AT,
                  "log_every": 1, "lr": 1e-3, "warmup_steps": 2, "max_grad_norm": 1.0, "eval_at_start": False,
                  "eval_batch_size": 4, "precision": "fp32", "compile": False if cpu else True},
    }
    if SMOKE:
        r["model"]["config_overrides"].update({"n_layer": 2, "n_embd": 64, "n_head": 2})
        r["data"]["max_eval_samples"] = 16
        r["train"].update({"max_steps": STEPS, "save_every": SAVE_AT})
    return r


# -- the node side: one process per rank under torchrun ----------------------------------------


def worker(run_dir: Path, resume: Path | None, sizes: str) -> None:
    """Train the run directory's recipe (then one step per size), write this rank's facts."""
    import torch

    from clustertune.recipe.load import load_recipe
    from clustertune.runs.paths import RunPaths
    from clustertune.train.execute import execute
    from clustertune.train.precision import mixed_precision

    import torch.distributed as dist

    from clustertune.train.strategies.group import start_process_group

    rank = int(os.environ.get("RANK", "0"))
    facts: dict[str, Any] = {"rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", "0"))}
    recipe = load_recipe(run_dir / "recipe.yaml")
    t = recipe.train
    # The group clustertune's node side makes (made here first, so its backend can be read);
    # kept up for the runs after this one: one made again under the same launcher store can hang.
    start_process_group(t.strategy == "fsdp", t.effective_offload != "none", t.collective_timeout_minutes)
    facts["backend"] = str(dist.get_backend()) if dist.is_initialized() else "none"
    destroy = dist.destroy_process_group
    dist.destroy_process_group = lambda group=None: None
    if torch.cuda.is_available():
        import torch._dynamo.utils

        torch._dynamo.utils.counters.clear()
    execute(recipe, RunPaths(run_dir), resume, show_progress=False)
    facts["auto_precision"] = mixed_precision(load_recipe({**recipe.to_plain(), "train": {
        **recipe.to_plain()["train"], "precision": "auto"}}))
    if torch.cuda.is_available():
        import torch._dynamo.utils

        c = torch._dynamo.utils.counters
        facts["device"] = torch.cuda.current_device()
        facts["device_name"] = torch.cuda.get_device_name()
        facts["capability"] = list(torch.cuda.get_device_capability())
        facts["graph_breaks"] = sum(c["graph_break"].values())
        facts["unique_graphs"] = int(c["stats"].get("unique_graphs", 0))
        facts["peak_bytes"] = torch.cuda.max_memory_allocated()
    peaks = {}
    for spec in filter(None, sizes.split(",")):
        layers, width = (int(x) for x in spec.split("x"))
        sub = run_dir / "sizes" / spec
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        execute(load_recipe(sub / "recipe.yaml"), RunPaths(sub), None, show_progress=False)
        peaks[spec] = torch.cuda.max_memory_allocated() if torch.cuda.is_available() else None
    facts["size_peaks"] = peaks
    (run_dir / f"facts-{rank}.json").write_text(json.dumps(facts))
    if dist.is_initialized():
        dist.barrier()
        destroy()


# -- the checking side ------------------------------------------------------------------------


def job_dir(root: Path, name: str, recipe: dict[str, Any], data_from: Path | None) -> Path:
    """A run directory as `clustertune run` leaves it for the ranks; data prepared once."""
    import yaml

    import clustertune as ct
    from clustertune.data.run_data import data_step
    from clustertune.runs.paths import RunPaths

    d = root / name
    d.mkdir(parents=True)
    r = ct.load_recipe(recipe)
    (d / "recipe.yaml").write_text(yaml.safe_dump(r.to_plain()))
    if data_from is None:
        data_step(r, RunPaths(d))
    else:
        shutil.copytree(data_from / "tokenizer", d / "tokenizer")
        shutil.copy2(data_from / "data.json", d / "data.json")
    return d


def launch(run_dir: Path, nproc: int, resume: Path | None = None, sizes: str = "") -> tuple[bool, str]:
    """``nproc`` ranks under torchrun; 0: one plain process, no launcher (as `clustertune run` on one GPU)."""
    runner = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)] if nproc else []
    cmd = [sys.executable, *runner, __file__, "--worker", str(run_dir)]
    cmd += (["--resume", str(resume)] if resume else []) + (["--sizes", sizes] if sizes else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    (run_dir / "launch.log").write_text(out.stdout + out.stderr)
    return out.returncode == 0, (out.stdout + out.stderr)[-1500:]


def losses(run_dir: Path) -> dict[int, float]:
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {r["step"]: r["loss"] for r in rows if r["kind"] == "train"}


def final_eval(run_dir: Path) -> float:
    return float(json.loads((run_dir / "summary.json").read_text())["final_eval"]["eval_loss"])


def facts(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("facts-*.json"))]


def plain_eval(run_dir: Path) -> tuple[float, set[str]]:
    """Eval loss of the saved model directory with transformers alone (fp32), and its dtypes."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    from clustertune.data.staging import open_run_data
    from clustertune.recipe.load import load_recipe
    from clustertune.runs.paths import RunPaths

    hf_logging.disable_progress_bar()
    recipe = load_recipe(run_dir / "recipe.yaml")
    _, ev = open_run_data(recipe, RunPaths(run_dir), 0, None)
    model = AutoModelForCausalLM.from_pretrained(str(run_dir / "model"), dtype="auto").eval()
    dtypes = {str(p.dtype) for p in model.parameters()}
    model = model.float()
    total = 0.0
    with torch.no_grad():
        for i in range(len(ev)):
            ids = torch.from_numpy(ev.input_ids[i : i + 1].astype("int64"))
            total += float(model(input_ids=ids, labels=ids).loss)
    return total / len(ev), dtypes


class Table:
    def __init__(self, json_path: Path | None = None) -> None:
        self.rows: list[tuple[str, str, str]] = []
        self.json_path = json_path

    def add(self, name: str, ok: bool | None, detail: str) -> None:
        self.rows.append((name, {True: "PASS", False: "FAIL", None: "SKIP"}[ok], detail))
        print(f"{name:<38} {self.rows[-1][1]:<5} {detail}", flush=True)
        if self.json_path is not None:  # rewritten after every row: a run cut off still reports
            rows = [{"check": n, "status": st, "detail": d} for n, st, d in self.rows]
            self.json_path.write_text(json.dumps(rows, indent=1) + "\n")

    def failed(self) -> int:
        return sum(1 for _, s, _ in self.rows if s == "FAIL")


def check_strategy(table: Table, root: Path, name: str, n: int, cpu: bool, baseline: Path) -> None:
    train = {**CASES[name], "precision": "fp32" if cpu else "bf16"}
    if train["strategy"] == "deepspeed" and importlib.util.find_spec("deepspeed") is None:
        table.add(name, None, "DeepSpeed is not installed here (pip install deepspeed to check ZeRO)")
        return
    recipe = base_recipe(cpu)
    recipe["train"].update(train)
    full = job_dir(root, name, recipe, baseline)
    ok, tail = launch(full, n)
    if not ok:
        table.add(name, False, "training failed: " + cause(tail))
        return
    want, got = losses(baseline), losses(full)
    tol = LOSS_TOL_FP32 if cpu else LOSS_TOL_BF16
    worst = max(abs(got[s] - want[s]) for s in want)
    table.add(f"{name}: loss vs one-GPU fp32", worst < tol and sorted(got) == sorted(want),
              f"max |diff| {worst:.4f} over {len(got)} steps (tolerance {tol})")
    ckpt = full / "checkpoints" / f"step-{SAVE_AT:08d}"
    resumed = job_dir(root, f"{name}-resumed", recipe, baseline)
    shutil.copytree(ckpt, resumed / "checkpoints" / ckpt.name)
    ok, tail = launch(resumed, n, resumed / "checkpoints" / ckpt.name)
    if ok:
        diff = abs(final_eval(resumed) - final_eval(full))
        table.add(f"{name}: resume", diff < (1e-4 if cpu else 1e-2),
                  f"eval loss after resume {final_eval(resumed):.4f} vs {final_eval(full):.4f}")
    else:
        table.add(f"{name}: resume", False, "resume failed: " + cause(tail))
    plain, dtypes = plain_eval(full)
    table.add(f"{name}: gathered model", abs(plain - final_eval(full)) < (1e-4 if cpu else 2e-2)
              and dtypes == {"torch.float32"},
              f"plain transformers eval {plain:.4f} vs run {final_eval(full):.4f}, weights {sorted(dtypes)}")
    if not cpu:
        f = facts(full)
        breaks, graphs = max(x["graph_breaks"] for x in f), max(x["unique_graphs"] for x in f)
        # One graph for training and one for evaluation (the mode switch); no shape recompiles.
        # FSDP compiles region by region (train/fastpath.py): GPT-2's block, its two embeddings,
        # dropout, final norm and output layer, each once per mode.
        most = 2 * (6 if train["strategy"] == "fsdp" else 1)
        table.add(f"{name}: compile", breaks == 0 and graphs <= most,
                  f"graph breaks {breaks}, graphs {graphs} (at most {most})")


def check_one_process(table: Table, root: Path, n: int, cpu: bool, baseline: Path) -> None:
    """FSDP with offload on one device and no launcher: the bigger-model-on-one-GPU case, on
    the reference's global batch (accumulation 2 x the ranks of the other checks)."""
    recipe = base_recipe(cpu)
    recipe["train"].update({"strategy": "fsdp", "offload": "params", "precision": "fp32" if cpu else "bf16",
                            "gradient_accumulation_steps": 2 * n, "save_every": None})
    d = job_dir(root, "fsdp+offload-one-process", recipe, baseline)
    ok, tail = launch(d, 0)
    name = "fsdp+offload, 1 device, no launcher"
    if not ok:
        table.add(name, False, "failed: " + cause(tail))
        return
    want, got = losses(baseline), losses(d)
    tol = LOSS_TOL_FP32 if cpu else LOSS_TOL_BF16
    worst = max(abs(got[s] - want[s]) for s in want)
    table.add(name, worst < tol and sorted(got) == sorted(want),
              f"max |diff| {worst:.4f} over {len(got)} steps (tolerance {tol}), backend {facts(d)[0]['backend']}")


def check_memory(table: Table, root: Path, n: int, cpu: bool, baseline: Path) -> None:
    from transformers import AutoConfig

    import clustertune as ct
    from clustertune.recipe.load import load_recipe
    from clustertune.train import memory

    recipe = base_recipe(cpu)
    recipe["train"].update({"strategy": "fsdp", "precision": "fp32" if cpu else "bf16", "max_steps": 1,
                            "save_every": None, "compile": False})
    d = job_dir(root, "memory", recipe, baseline)
    specs = []
    for layers, width in SIZES[:1] if cpu else SIZES:
        spec = f"{layers}x{width}"
        r = ct.load_recipe(recipe).to_plain()
        r["model"]["config_overrides"].update({"n_layer": layers, "n_embd": width, "n_head": width // 64})
        job_dir(d / "sizes", spec, r, baseline)
        specs.append(spec)
    ok, tail = launch(d, n, sizes=",".join(specs))
    if not ok:
        table.add("estimate-memory", False, "failed: " + cause(tail))
        return
    if cpu:
        table.add("estimate-memory", None, "peak device memory is measured on GPUs only")
        return
    f = facts(d)
    for spec in specs:
        sub = d / "sizes" / spec
        r = load_recipe(sub / "recipe.yaml")
        (est,) = memory.estimate_all(r, AutoConfig.from_pretrained(sub / "model"), n, True, ["fsdp"])
        peak = max(x["size_peaks"][spec] for x in f)
        ratio = peak / est.device_total
        table.add(f"estimate-memory fsdp {spec}", 0.6 <= ratio <= 1.1,
                  f"measured peak {peak / 2**30:.2f} GiB, estimate {est.device_total / 2**30:.2f} GiB "
                  f"(measured/estimate {ratio:.2f}; pass: 0.6-1.1)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gpus", type=int, default=None, help="ranks to use (default: every visible GPU)")
    p.add_argument("--only", default="", help="comma-separated cases: " + ", ".join(CASES) + ", one-process, memory")
    p.add_argument("--out", type=Path, default=None, help="keep the run directories here")
    p.add_argument("--cpu", action="store_true", help="check the harness on CPU ranks (gloo, fp32)")
    p.add_argument("--smoke", action="store_true", help="a tiny model and 6 steps: checks the harness itself")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here, each as soon as it is known")
    p.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--resume", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        worker(a.worker, a.resume, a.sizes)
        return 0
    if a.smoke:
        global SMOKE, STEPS, SAVE_AT
        SMOKE, STEPS, SAVE_AT = True, 6, 3
    import torch

    if not a.cpu and not torch.cuda.is_available():
        print("no CUDA device here: run this on a GPU node (or --cpu to check the harness)", file=sys.stderr)
        return 2
    n = a.gpus or (2 if a.cpu else torch.cuda.device_count())
    only = [x for x in a.only.split(",") if x] or [*CASES, "one-process", "memory"]
    root = a.out or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    table = Table(a.json)
    print(f"{n} rank(s) on {'CPU' if a.cpu else torch.cuda.get_device_name(0)}; run directories in {root}")

    # The reference: one device, fp32, the same global batch (accumulation makes up the ranks).
    ref = base_recipe(a.cpu)
    ref["train"].update({"gradient_accumulation_steps": 2 * n, "compile": False})
    baseline = job_dir(root, "baseline-fp32", ref, None)
    ok, tail = launch(baseline, 1)
    if not ok:
        table.add("one-device fp32 reference", False, cause(tail))
        return 1
    f = facts(baseline)[0]
    if not a.cpu:
        cap = tuple(f["capability"])
        table.add("precision auto", f["auto_precision"] == ("bf16" if cap >= (8, 0) else "fp16"),
                  f"{f['device_name']} (sm_{cap[0]}{cap[1]}): auto -> {f['auto_precision']}")
    for name in [x for x in only if x in CASES]:
        check_strategy(table, root, name, n, a.cpu, baseline)
        if name == only[0] and not a.cpu:
            ranks = facts(root / name)
            devices = sorted(x["device"] for x in ranks)
            table.add("devices", devices == list(range(n)) and all("nccl" in x["backend"] for x in ranks),
                      f"ranks on GPUs {devices}, backends {sorted({x['backend'] for x in ranks})}")
    if "one-process" in only:
        check_one_process(table, root, n, a.cpu, baseline)
    if "memory" in only:
        check_memory(table, root, n, a.cpu, baseline)
    print()
    print(f"{'check':<38} {'result':<6} detail")
    for name, status, detail in table.rows:
        print(f"{name:<38} {status:<6} {detail}")
    print(f"\n{table.failed()} failed, {len(table.rows)} checks")
    if a.out is None and not table.failed():
        shutil.rmtree(root, ignore_errors=True)
    return 1 if table.failed() else 0


if __name__ == "__main__":
    raise SystemExit(main())
