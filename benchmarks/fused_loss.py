"""The output layer plus cross-entropy, unfused (``F.cross_entropy(hidden @ W.T, targets)``, as
transformers computes a causal LM's loss) against clustertune's chunked version
(``train/chunked_loss.py``), on CPU: peak memory and time of one forward and backward, each in a
fresh process (``ru_maxrss`` minus the process's own size after its inputs were made), and the
difference of their losses and gradients. ``--device cuda`` measures the same in bf16 on a GPU
(peak allocated memory), with Liger Kernel's fused kernel beside them where it is installed.

    .venv/bin/python benchmarks/fused_loss.py                         # 4096 tokens, GPT-2's 50,257 entries
    .venv/bin/python benchmarks/fused_loss.py --tokens 8192 --vocab 128256 --hidden 1024
    .venv/bin/python benchmarks/fused_loss.py --smoke
    python benchmarks/fused_loss.py --device cuda --tokens 16384 --vocab 128256 --hidden 4096   # a GPU visit

The last line is ``ratio=<unfused peak / chunked peak>`` (the memory the logits no longer take).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def one(variant: str, tokens: int, hidden: int, vocab: int, chunk: int, device: str) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(SRC))
    from clustertune.train.chunked_loss import chunked_linear_cross_entropy, linear_cross_entropy

    torch.manual_seed(0)
    torch.set_num_threads(1)
    dev = torch.device(device)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    h = torch.randn(tokens, hidden, device=dev, dtype=dtype, requires_grad=True)
    w = (torch.randn(vocab, hidden, device=dev) * hidden ** -0.5).to(dtype).requires_grad_()
    t = torch.randint(0, vocab, (tokens,), device=dev)
    t[::5] = -100  # a prompt's positions, not trained
    if dev.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    if variant == "unfused":
        loss = F.cross_entropy((h @ w.T).float(), t)
    elif variant == "chunked":
        loss = chunked_linear_cross_entropy(h, w, t, chunk_rows=chunk)
    else:  # liger: the kernel linear_cross_entropy picks on a GPU where it is installed
        loss = linear_cross_entropy(h, w, t)
    loss.backward()
    if dev.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - before
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    seconds = time.perf_counter() - start
    return {"loss": float(loss), "seconds": seconds, "peak_mib": peak / 2**20,
            "grad_h": h.grad.double().norm().item(), "grad_w": w.grad.double().norm().item()}


def liger_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("liger_kernel") is not None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--device", default="cpu", help="cpu (fp32; peak resident memory) or cuda (bf16; peak allocated)")
    p.add_argument("--smoke", action="store_true", help="a small size, for CI")
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.smoke:
        a.tokens, a.hidden, a.vocab, a.chunk = 512, 64, 8192, 128
    if a.one:
        print(json.dumps(one(a.one, a.tokens, a.hidden, a.vocab, a.chunk, a.device)))
        return
    kind = "bf16, GPU" if a.device.startswith("cuda") else "fp32, CPU, one thread"
    print(f"{a.tokens} tokens x hidden {a.hidden} -> vocabulary {a.vocab} ({kind}; chunk {a.chunk} rows)")
    got = {}
    variants = ["unfused", "chunked"] + (["liger"] if a.device.startswith("cuda") and liger_installed() else [])
    for variant in variants:
        out = subprocess.run([sys.executable, __file__, "--one", variant, "--tokens", str(a.tokens), "--hidden",
                              str(a.hidden), "--vocab", str(a.vocab), "--chunk", str(a.chunk), "--device", a.device],
                             capture_output=True, text=True, check=True)
        got[variant] = json.loads(out.stdout.strip().splitlines()[-1])
        r = got[variant]
        print(f"{variant:8s} loss {r['loss']:.6f}  peak +{r['peak_mib']:.0f} MiB  {r['seconds']:.3f} s")
    if "liger" in got:
        print(f"liger / chunked peak: {got['liger']['peak_mib'] / max(got['chunked']['peak_mib'], 1e-9):.2f}, time "
              f"{got['liger']['seconds'] / got['chunked']['seconds']:.2f}")
    u, c = got["unfused"], got["chunked"]
    print(f"loss difference {abs(u['loss'] - c['loss']):.2e}; gradient norms hidden {u['grad_h']:.6f} / "
          f"{c['grad_h']:.6f}, weight {u['grad_w']:.6f} / {c['grad_w']:.6f}")
    print(f"time chunked / unfused: {c['seconds'] / u['seconds']:.2f}")
    print(f"ratio={u['peak_mib'] / max(c['peak_mib'], 1e-9):.2f}")


if __name__ == "__main__":
    main()
