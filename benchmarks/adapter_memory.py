"""Per-rank training state of full fine-tuning, LoRA and QLoRA, side by side (CPU, one process).

The same Llama-shaped base (built from a config and saved with save_pretrained, so it loads as
a "pretrained" model), the same data and settings; each variant is a real ``clustertune run``
of one step whose loop records what the process holds right around its first optimizer step
(weights, gradients, optimizer state: the ``state_memory`` row of metrics.jsonl, the figure
estimate-memory is held to). Each run's estimate-memory figure is printed beside it.

Also: the bytes per parameter of QLoRA's quantized Linear layers, their quantization state
(absmax, code tables) included, and the embedding and output layer (kept in 32 bits here on CPU)
reported apart.

    .venv/bin/python benchmarks/adapter_memory.py                    # width 512, 8 layers
    .venv/bin/python benchmarks/adapter_memory.py --width 1024 --layers 8

The last line is ``ratio=<QLoRA state / full fine-tuning state>``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make_base(out: Path, width: int, layers: int) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from clustertune.data.builtin import pydoc_paragraphs
    from clustertune.models.tokenizer import train_bpe

    tok = train_bpe(pydoc_paragraphs(), 4096, classification=False, model_max_length=128)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=width, intermediate_size=width * 8 // 3 // 64 * 64,
                         num_hidden_layers=layers, num_attention_heads=max(1, width // 64), max_position_embeddings=128,
                         tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(str(out))
    tok.save_pretrained(str(out))


def one_step(base: Path, root: Path, adapter: dict[str, Any] | None) -> tuple[dict[str, int], Any]:
    import clustertune as ct
    from clustertune.models.build import resolve_config
    from clustertune.train import memory

    model: dict[str, Any] = {"name_or_path": str(base)}
    if adapter:
        model["adapter"] = adapter
    recipe = ct.load_recipe({
        "name": "mem", "model": model,
        "data": {"dataset": "builtin:pydoc", "block_size": 128, "max_eval_samples": 4},
        "train": {"batch_size": 2, "max_steps": 1, "log_every": 1, "precision": "fp32"},
    })
    run = ct.run(recipe, runs_root_dir=root, show_progress=False)
    (row,) = [json.loads(line) for line in run.paths.metrics.read_text().splitlines() if '"state_memory"' in line]
    shape = memory.model_shape(resolve_config(recipe, None), "causal_lm", recipe)
    return row["ranks"][0], memory.estimate(shape, "ddp", 1, 0)


def qlora_layers(base: Path) -> dict[str, float]:
    """Bytes per parameter of the 4-bit Linear layers (quantization state included), and the
    16/32-bit rest: embedding and output layer."""
    import bitsandbytes as bnb
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    from clustertune.train.held_state import distinct_bytes, quant_state_tensors

    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=torch.float32)
    model = AutoModelForCausalLM.from_pretrained(str(base), quantization_config=quant, device_map={"": "cpu"})
    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    weights = [m.weight for m in layers]
    held = distinct_bytes({"packed": weights, "state": quant_state_tensors([*weights, *layers])})
    n = sum(m.in_features * m.out_features for m in layers)
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    return {"quantized_params": n, "packed_bytes": held["packed"], "state_bytes": held["state"],
            "bytes_per_param": (held["packed"] + held["state"]) / n,
            "embedding_bytes": emb.numel() * emb.element_size(), "output_bytes": head.numel() * head.element_size()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--smoke", action="store_true", help="the smallest size: checks that the benchmark still runs (CI), not a measurement")
    a = ap.parse_args()
    if a.smoke:
        a.width, a.layers = 64, 2
    mib = 2**20
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        os.environ["CLUSTERTUNE_CACHE"] = str(Path(tmp) / "cache")
        make_base(base, a.width, a.layers)
        variants = {"full": None, "lora": {"type": "lora", "rank": 16, "alpha": 32},
                    "qlora": {"type": "qlora", "rank": 16, "alpha": 32}}
        held = {}
        print(f"Llama-shaped base: width {a.width}, {a.layers} layers; adapters rank 16 on every linear layer")
        print(f"{'variant':8} {'params MiB':>11} {'grads MiB':>10} {'optim MiB':>10} {'total MiB':>10} "
              f"{'estimate MiB':>13}")
        for name, adapter in variants.items():
            h, est = one_step(base, Path(tmp) / name, adapter)
            held[name] = total = h["params"] + h["grads"] + h["optimizer"] + h["host"]
            print(f"{name:8} {h['params'] / mib:11.2f} {h['grads'] / mib:10.2f} {h['optimizer'] / mib:10.2f} "
                  f"{total / mib:10.2f} {(est.params + est.grads + est.optimizer) / mib:13.2f}")
        q = qlora_layers(base)
        print(f"QLoRA 4-bit Linear layers: {q['quantized_params'] / 1e6:.2f}M parameters, "
              f"{q['packed_bytes'] / mib:.2f} MiB packed + {q['state_bytes'] / mib:.3f} MiB quantization state = "
              f"{q['bytes_per_param']:.4f} bytes/parameter")
        print(f"kept unquantized (fp32 on CPU): embedding {q['embedding_bytes'] / mib:.2f} MiB, "
              f"output layer {q['output_bytes'] / mib:.2f} MiB")
        print(f"lora/full={held['lora'] / held['full']:.3f}")
        print(f"ratio={held['qlora'] / held['full']:.3f}")


if __name__ == "__main__":
    main()
