"""One command for a one-GPU machine with little time: proves clustertune's GPU paths and measures
them, in priority order, writing each result as soon as it is known.

    python3 benchmarks/gpu_hour.py --out DIR                 # on the GPU machine (see benchmarks/GPU.md)
    python3 benchmarks/gpu_hour.py --out DIR --cpu --tiny    # the same parts on CPU, tiny shapes (CI)

Parts, in this order, each with a time cap and the whole run within --budget seconds (a part
that no longer fits is a SKIP row saying so):

  env          installs the carried wheels (.whl/, from scripts/gpu_wheels.sh) into a target
               directory without network; the GPU, driver and package versions beside the ones
               this checkout is tested with; every module a GPU path needs imports
  correctness  gpu_check.py: precision auto, devices, FSDP in bf16 + torch.compile against the
               one-GPU fp32 reference, resume from the mid-run checkpoint, the gathered fp32
               model, FSDP + offload in one process without a launcher
  gpt2-speed   gpu_gpt2.py: GPT-2 124M at 1024 in bf16, clustertune vs Trainer's defaults vs Trainer
               with compile and fused AdamW, same batch
  sft-speed    sft_gpu.py: LoRA SFT of a ~1B Llama-shaped model at 2048, clustertune vs SFTTrainer
  more-checks  gpu_check.py: ZeRO-3, ZeRO-2 (DeepSpeed carried without its compiled ops), FSDP +
               offload under the launcher, estimate-memory against the measured peak
  serve-speed  serve.py: clustertune serve vs transformers serve --continuous-batching on the GPU,
               GPT-2 small's shape in bf16, tokens/s and latency at 1 and 16 clients
  gpt2-modes   gpu_gpt2.py: the same GPT-2 compiled with CUDA graphs (train.compile_mode
               reduce-overhead) and with autotuned kernels, against the default compile
  qlora        adapter_memory.py: full, LoRA and QLoRA (bitsandbytes) runs side by side
  fp8          fp8_check.py: a ~1.1B Llama-shaped model, 100 steps with train.fp8 and without, the
               losses and tokens/s side by side (torchao carried in place of bitsandbytes)
  cpu-adam     builds DeepSpeed's CPU Adam (what ZeRO-offload needs) if the time left allows

Out: DIR/results.json and DIR/results.md (rewritten after every row), DIR/<part>.log, and the
parts' own files. Exit status 1 when any row FAILs. Standard library only until the wheels are
installed: it runs on the image's bare Python.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# The scripts the parts start by path: what runs on the GPU machine besides this file.
SCRIPTS = ("gpu_check.py", "gpu_gpt2.py", "sft_gpu.py", "sft_cpu.py", "adapter_memory.py", "serve.py", "fp8_check.py")
# Modules that the GPU paths import and the image lacks (they travel as wheels); required ones
# FAIL the env part when missing, the others make their part SKIP.
REQUIRED = ("clustertune", "pydantic", "yaml", "torch", "transformers", "accelerate", "peft", "gigatoken",
            "awkward", "safetensors", "tokenizers", "xxhash", "rich")
OPTIONAL = {"deepspeed": "more-checks (ZeRO)", "trl": "sft-speed (SFTTrainer)", "datasets": "sft-speed",
            "fastapi": "serve-speed", "uvicorn": "serve-speed", "openai": "serve-speed",
            "bitsandbytes": "qlora", "liger_kernel": "fused loss (Liger's kernel; else the chunked torch one)", "torchao": "fp8 (train.fp8)"}
VERSIONS = ("torch", "transformers", "accelerate", "peft", "tokenizers", "pyarrow", "safetensors", "numpy",
            "pydantic", "datasets", "trl", "deepspeed", "bitsandbytes", "gigatoken")


class Report:
    """The rows so far, written to results.json and results.md after every change."""

    def __init__(self, out: Path, mode: str) -> None:
        self.out, self.rows, self.parts = out, [], []
        self.machine: dict[str, Any] = {"mode": mode, "python": platform.python_version(), "host": platform.node()}
        self.write()

    def add(self, part: str, check: str, status: str, detail: str) -> None:
        self.rows.append({"part": part, "check": check, "status": status, "detail": detail})
        print(f"{part:<12} {check:<40} {status:<5} {detail}", flush=True)
        self.write()

    def part_done(self, part: str, seconds: float, note: str = "") -> None:
        self.parts.append({"part": part, "seconds": round(seconds, 1), "note": note})
        self.write()

    def failed(self) -> int:
        return sum(r["status"] == "FAIL" for r in self.rows)

    def write(self) -> None:
        data = {"machine": self.machine, "parts": self.parts, "rows": self.rows}
        tmp = self.out / "results.json.tmp"
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(self.out / "results.json")
        m = self.machine
        lines = [f"GPU: {m.get('gpu', '?')}; driver {m.get('driver', '?')}; torch {m.get('torch', '?')}; "
                 f"Python {m['python']}; mode {m['mode']}", "",
                 "| part | seconds | note |", "| --- | --- | --- |"]
        lines += [f"| {p['part']} | {p['seconds']} | {p['note']} |" for p in self.parts]
        lines += ["", "| part | check | result | detail |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['part']} | {r['check']} | {r['status']} | {r['detail'].replace('|', '/')} |" for r in self.rows]
        (self.out / "results.md").write_text("\n".join(lines) + "\n")


class Harness:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a, self.out = a, a.out
        self.deadline = time.monotonic() + a.budget
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                    "PYTHONUNBUFFERED": "1"}
        self.report = Report(a.out, "cpu rehearsal (tiny shapes)" if a.cpu else "gpu")
        self.missing: set[str] = set()

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, part: str, args: list[str], cap: float) -> tuple[int | None, str]:
        """Run ``python args`` for at most ``cap`` seconds (and the time left); its output goes to
        DIR/<part>.log. Returns (exit status, or None when stopped at the limit; output tail)."""
        limit = max(1.0, min(cap, self.left()))
        log = self.out / f"{part}.log"
        with log.open("a") as f:
            f.write(f"$ {' '.join(args)}\n")
            f.flush()
            p = subprocess.Popen([sys.executable, *args], stdout=f, stderr=subprocess.STDOUT, env=self.env,
                                 cwd=REPO, start_new_session=True)
            try:
                rc: int | None = p.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)  # the part's own process group: torchrun ranks too
                p.wait()
                rc = None
        tail = log.read_text(errors="replace")[-3000:]
        return rc, tail


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(no output)"


# -- the parts ----------------------------------------------------------------------------------


def part_env(h: Harness) -> None:
    r, a = h.report, h.a
    site = a.out / "site"
    wheels = sorted(a.wheels.glob("*.whl")) if a.wheels.is_dir() else []
    if a.cpu:
        r.add("env", "install wheels", "SKIP", "rehearsal: uses this environment as it is (the wheels are for "
              "CPython 3.12 on the GPU image)")
    elif not wheels:
        r.add("env", "install wheels", "SKIP", f"no wheels in {a.wheels} (run scripts/gpu_wheels.sh and carry .whl)")
    else:
        t = time.monotonic()
        shutil.rmtree(site, ignore_errors=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                               "--no-compile", "--no-cache-dir", "--target", str(site), *map(str, wheels)],
                              capture_output=True, text=True)
        ok = proc.returncode == 0
        r.add("env", "install wheels", "PASS" if ok else "FAIL",
              f"{len(wheels)} wheels into {site} in {time.monotonic() - t:.0f} s" if ok
              else last_line(proc.stdout + proc.stderr))
        if ok:
            h.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), h.env.get("PYTHONPATH")]))
    # The checkout's own code first: the scripts run from it, and a wheel built before a late edit
    # would test older code than the scripts beside it.
    if (REPO / "src" / "clustertune").is_dir():
        h.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), h.env.get("PYTHONPATH")]))
    code = f"""
import importlib, json, sys
from importlib.metadata import version
out = {{"versions": {{}}, "missing": {{}}}}
for n in {VERSIONS!r}:
    try: out["versions"][n] = version(n)
    except Exception: pass
for m in {(*REQUIRED, *OPTIONAL)!r}:
    try: importlib.import_module(m)
    except Exception as e: out["missing"][m] = f"{{type(e).__name__}}: {{e}}"[:200]
import torch
out["cuda"] = torch.cuda.is_available()
out["gpu"] = torch.cuda.get_device_name(0) if out["cuda"] else "none (CPU)"
out["capability"] = list(torch.cuda.get_device_capability(0)) if out["cuda"] else None
out["cuda_runtime"] = torch.version.cuda
import clustertune
out["clustertune_from"] = str(clustertune.__file__)
print("FACTS " + json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], env=h.env, capture_output=True, text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("FACTS ")), None)
    if line is None:
        r.add("env", "imports", "FAIL", last_line(proc.stderr))
        return
    facts = json.loads(line[6:])
    driver = "none"
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True)
        driver = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else "unknown"
    r.machine.update(gpu=facts["gpu"], driver=driver, torch=facts["versions"].get("torch", "?"),
                     capability=facts["capability"], cuda_runtime=facts["cuda_runtime"], versions=facts["versions"],
                     clustertune_from=facts["clustertune_from"])
    tested_file = a.wheels / "tested-versions.json"
    tested = json.loads(tested_file.read_text()) if tested_file.exists() else {}
    here = facts["versions"]
    pairs = [f"{n} {here.get(n, 'absent')}" + (f" (tested {tested[n]})" if n in tested and tested[n] != here.get(n)
                                                else "") for n in ("torch", "transformers", "accelerate", "peft")]
    r.add("env", "versions", "PASS", "; ".join(pairs) + ("" if tested else " (no tested-versions.json beside the wheels)"))
    if not a.cpu and not facts["cuda"]:
        r.add("env", "cuda device", "FAIL", "torch sees no CUDA device (use --cpu --tiny to rehearse on CPU)")
    missing = facts["missing"]
    h.missing = set(missing)
    required = {m: e for m, e in missing.items() if m in REQUIRED}
    r.add("env", "imports", "FAIL" if required else "PASS",
          "; ".join(f"{m}: {e}" for m, e in required.items()) if required else
          f"{len(REQUIRED)} required modules import" + (
              "; missing, so their parts SKIP: " + ", ".join(f"{m} ({OPTIONAL[m]})" for m in missing) if missing else ""))


def gpu_check(h: Harness, part: str, only: str, cap: float) -> None:
    rows_file = h.out / f"{part}.json"
    args = [str(HERE / "gpu_check.py"), "--gpus", "1", "--only", only, "--out", str(h.out / part),
            "--json", str(rows_file)] + (["--cpu"] if h.a.cpu else []) + (["--smoke"] if h.a.tiny else [])
    rc, tail = h.run(part, args, cap)
    rows = json.loads(rows_file.read_text()) if rows_file.exists() else []
    for row in rows:
        h.report.add(part, row["check"], row["status"], row["detail"])
    if rc is None:
        h.report.add(part, "(the rest)", "FAIL", f"stopped at its time limit after {len(rows)} rows; see {part}.log")
    elif rc != 0 and not any(row["status"] == "FAIL" for row in rows):
        h.report.add(part, "gpu_check.py", "FAIL", f"exit {rc}: {last_line(tail)}")


def part_correctness(h: Harness) -> None:
    # On an H100 (2026-11-27) the four launches of fsdp and one-process needed more than 150 s.
    gpu_check(h, "correctness", "fsdp" if h.a.tiny else "fsdp,one-process", 210)


def part_more_checks(h: Harness) -> None:
    if h.a.tiny:
        h.report.add("more-checks", "zero3, zero2, fsdp+offload, memory", "SKIP",
                     "tiny rehearsal: these are gpu_check.py cases as in correctness, run on a GPU only "
                     "(ZeRO through Accelerate on CPU ranks is not supported)")
        return
    if "deepspeed" in h.missing:
        h.report.add("more-checks", "zero3, zero2", "SKIP", "deepspeed does not import here (see env)")
    gpu_check(h, "more-checks", "zero3,zero2,fsdp+offload,memory", 240)


def part_gpt2(h: Harness) -> None:
    size = ["--smoke"] if h.a.tiny else ["--size", "gpt2", "--batch", "16", "--steps", "30", "--skip", "10",
                                           "--variants", "clustertune,trainer,trainer-compile"]
    # On an H100 a step takes about 50 ms; the minutes go to building, compiling and Trainer's set-up
    # (Trainer + compile + fused AdamW, the best Trainer setup, compiles once more: 50 s more allowed).
    gpt2_part(h, "gpt2-speed", size, 200)


def part_gpt2_modes(h: Harness) -> None:
    # train.compile_mode against the default compile: CUDA graphs (reduce-overhead) and kernel
    # autotuning without them, each compiled in a process of its own.
    if h.a.tiny:
        h.report.add("gpt2-modes", "compile modes side by side", "SKIP",
                     "tiny rehearsal: compiling the tiny model on CPU takes 30-60 s per variant (GPU run only); "
                     "each mode's compile and its fallback are tested in tests/unit/train/test_strategies_config.py")
        return
    gpt2_part(h, "gpt2-modes", ["--size", "gpt2", "--batch", "16", "--steps", "30", "--skip", "10",
                                "--variants", "clustertune,clustertune-graphs,clustertune-autotune"], 300)


def gpt2_part(h: Harness, part: str, size: list[str], cap: float) -> None:
    rows_file = h.out / f"{part}.json"
    rc, tail = h.run(part, [str(HERE / "gpu_gpt2.py"), *size, "--json", str(rows_file)], cap)
    if rc != 0 or not rows_file.exists():
        h.report.add(part, "tokens/s side by side", "FAIL",
                     "stopped at its time limit" if rc is None else f"exit {rc}: {last_line(tail)}")
        return
    rows = json.loads(rows_file.read_text())["rows"]
    by = {row["variant"]: row for row in rows}
    for row in rows:
        mfu = "" if row.get("mfu") is None else f", MFU {100 * row['mfu']:.1f}%"
        mem = "" if row.get("peak_mem_gb") is None else f", peak {row['peak_mem_gb']:.1f} GB"
        h.report.add(part, f"{row['variant']} batch {row['batch']}", "PASS",
                     f"{row['tokens_per_s']:,.0f} tokens/s{mfu}{mem}")
    ours = by.get("clustertune") or by.get("clustertune-eager")
    pairs = [("ratio clustertune / Trainer", ours, by.get("trainer")),
             ("ratio clustertune / Trainer + compile + fused AdamW", ours, by.get("trainer-compile")),
             ("ratio CUDA graphs / default compile", by.get("clustertune-graphs"), by.get("clustertune")),
             ("ratio autotuned / default compile", by.get("clustertune-autotune"), by.get("clustertune"))]
    for check, a, b in pairs:
        if a and b:
            h.report.add(part, check, "PASS", f"{a['tokens_per_s'] / b['tokens_per_s']:.2f}x")


def part_sft(h: Harness) -> None:
    if {"trl", "datasets"} & h.missing:
        h.report.add("sft-speed", "LoRA SFT side by side", "SKIP", "trl or datasets does not import here (see env)")
        return
    rows_file = h.out / "sft-speed.json"
    args = ([str(HERE / "sft_gpu.py"), "--smoke"] if h.a.tiny else [str(HERE / "sft_gpu.py"), "--steps", "20", "--skip", "5"])
    # On an H100 (2026-11-27) 150 s did not reach the end of the first side: the 1.1B base is
    # built and saved, then each side loads and compiles it.
    rc, tail = h.run("sft-speed", [*args, "--sides", "ours,trl", "--json", str(rows_file)], 240)
    rounds = json.loads(rows_file.read_text())["rounds"] if rows_file.exists() else []
    for side, res in (rounds[-1] if rounds else {}).items():
        mfu = "" if res.get("mfu") is None else f", MFU {100 * res['mfu']:.1f}%"
        mem = "" if res.get("peak_mem_gb") is None else f", peak {res['peak_mem_gb']:.1f} GB"
        h.report.add("sft-speed", side, "PASS", f"{res['tokens_per_s']:,.0f} tokens/s{mfu}{mem}, "
                     f"eval loss {res['eval_loss']:.4f}")
    if rc != 0:
        h.report.add("sft-speed", "LoRA SFT side by side", "FAIL",
                     "stopped at its time limit" if rc is None else f"exit {rc}: {last_line(tail)}")
    elif rounds and {"ours", "trl"} <= set(rounds[-1]):
        last = rounds[-1]
        h.report.add("sft-speed", "ratio clustertune / SFTTrainer", "PASS",
                     f"{last['ours']['tokens_per_s'] / last['trl']['tokens_per_s']:.2f}x")


def part_serve(h: Harness) -> None:
    if {"fastapi", "uvicorn", "openai"} & h.missing:
        h.report.add("serve-speed", "serving side by side", "SKIP", "fastapi, uvicorn or openai does not import here")
        return
    rows_file = h.out / "serve-speed.json"
    args = (["--smoke"] if h.a.tiny else ["--size", "gpt2", "--rounds", "1", "--levels", "1,16"])
    device = ["--device", "cpu" if h.a.cpu else "cuda"]
    rc, tail = h.run("serve-speed", [str(HERE / "serve.py"), *args, *device, "--json", str(rows_file)], 150)
    if rc != 0 or not rows_file.exists():
        h.report.add("serve-speed", "tokens/s side by side", "FAIL",
                     "stopped at its time limit" if rc is None else f"exit {rc}: {last_line(tail)}")
        return
    for clients, row in json.loads(rows_file.read_text()).items():
        h.report.add("serve-speed", f"{clients} clients", "PASS",
                     f"clustertune {row['clustertune_tok_s'][-1]:,.0f} vs transformers serve {row['peer_tok_s'][-1]:,.0f} "
                     f"tokens/s ({row['ratio']:.2f}x); p50 {1000 * row['clustertune_p50_s']:.0f} vs "
                     f"{1000 * row['peer_p50_s']:.0f} ms")


def part_qlora(h: Harness) -> None:
    if "bitsandbytes" in h.missing:
        h.report.add("qlora", "QLoRA run", "SKIP", "bitsandbytes does not import here (left out of the wheels?)")
        return
    size = ["--smoke"] if h.a.tiny else ["--width", "1024", "--layers", "8"]
    rc, tail = h.run("qlora", [str(HERE / "adapter_memory.py"), *size], 120)
    ratio = [x for x in tail.splitlines() if x.startswith("ratio=")]
    ok = rc == 0 and bool(ratio)
    h.report.add("qlora", "full, LoRA and QLoRA runs", "PASS" if ok else "FAIL",
                 f"QLoRA state / full fine-tuning state: {ratio[-1][6:]}" if ok else
                 ("stopped at its time limit" if rc is None else f"exit {rc}: {last_line(tail)}"))


def part_fp8(h: Harness) -> None:
    # The CPU rehearsal needs no torchao: there the fp8 side must be refused for want of the GPU.
    if "torchao" in h.missing and not h.a.tiny:
        h.report.add("fp8", "FP8 vs bf16, 100 steps", "SKIP", "torchao does not import here: carried only when asked "
                     "for, in place of QLoRA's bitsandbytes (scripts/gpu_wheels.sh --with torchao --without bitsandbytes)")
        return
    rc, tail = h.run("fp8", [str(HERE / "fp8_check.py"), *(["--smoke"] if h.a.tiny else [])], 300)
    if rc != 0:
        h.report.add("fp8", "FP8 vs bf16", "FAIL", "stopped at its time limit" if rc is None else
                     f"exit {rc}: {last_line(tail)}")
        return
    lines = tail.splitlines()
    for line in lines:
        if line.startswith(("bf16:", "fp8:")):
            h.report.add("fp8", line.split(":", 1)[0] + " run", "PASS", line.split(":", 1)[1].strip())
        elif line.startswith("mean loss of the last 10 steps"):
            h.report.add("fp8", "loss against bf16 (within 2%)", "PASS" if line.endswith("PASS") else "FAIL", line)
    ratio = [x for x in lines if x.startswith("ratio=")]
    if ratio:
        h.report.add("fp8", "ratio FP8 / bf16 tokens/s", "PASS", f"{ratio[-1][6:]}x")


def part_cpu_adam(h: Harness) -> None:
    if h.a.tiny:
        h.report.add("cpu-adam", "DeepSpeed CPU Adam build", "SKIP",
                     "tiny rehearsal: the build takes about 100 s of compiling (GPU run only)")
        return
    if "deepspeed" in h.missing:
        h.report.add("cpu-adam", "DeepSpeed CPU Adam build", "SKIP", "deepspeed does not import here")
        return
    code = "from deepspeed.ops.op_builder import CPUAdamBuilder; CPUAdamBuilder().load(); print('built')"
    t = time.monotonic()
    rc, tail = h.run("cpu-adam", ["-c", code], 600)
    h.report.add("cpu-adam", "DeepSpeed CPU Adam build", "PASS" if rc == 0 else "SKIP",
                 f"built in {time.monotonic() - t:.0f} s (ZeRO-offload can run; not trained here)" if rc == 0 else
                 ("did not build in the time left: ZeRO-offload not checked" if rc is None
                  else f"build failed, ZeRO-offload not checked: {last_line(tail)}"))


PARTS: list[tuple[str, Callable[[Harness], None], float]] = [
    # (name, function, the least time left worth starting it with, in seconds)
    ("env", part_env, 5),
    ("correctness", part_correctness, 30),
    ("gpt2-speed", part_gpt2, 20),
    ("sft-speed", part_sft, 30),
    ("serve-speed", part_serve, 30),
    ("gpt2-modes", part_gpt2_modes, 60),
    ("more-checks", part_more_checks, 30),
    ("qlora", part_qlora, 20),
    ("fp8", part_fp8, 60),
    ("cpu-adam", part_cpu_adam, 30),
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="results.json, results.md and the logs go here")
    p.add_argument("--cpu", action="store_true", help="run on CPU (a rehearsal of the GPU run)")
    p.add_argument("--tiny", action="store_true", help="tiny shapes and fewer cases: the harness's own check")
    p.add_argument("--budget", type=float, default=300, help="seconds for the whole run (default 300)")
    p.add_argument("--only", default="", help="comma-separated parts: " + ", ".join(n for n, _, _ in PARTS))
    p.add_argument("--wheels", type=Path, default=REPO / ".whl", help="the carried wheels (default .whl)")
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    h = Harness(a)
    only = [x for x in a.only.split(",") if x]
    for name, fn, least in PARTS:
        if only and name not in only and name != "env":
            continue
        if h.left() < least:
            h.report.add(name, "(part)", "SKIP", f"not started: {h.left():.0f} s of the {a.budget:.0f} s budget left")
            h.report.part_done(name, 0.0, "not started")
            continue
        t = time.monotonic()
        try:
            fn(h)
            note = ""
        except Exception as exc:  # one broken part must not cost the rows of the others
            h.report.add(name, "(part)", "FAIL", f"{type(exc).__name__}: {exc}"[:300])
            note = "raised"
        h.report.part_done(name, time.monotonic() - t, note)
    print(f"\n{h.report.failed()} failed, {len(h.report.rows)} rows; {a.out / 'results.md'}")
    return 1 if h.report.failed() else 0


if __name__ == "__main__":
    raise SystemExit(main())
