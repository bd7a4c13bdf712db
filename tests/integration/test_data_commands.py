"""The data commands end to end, each a fresh `clustertune` process: `fetch` from a hub-shaped
HTTP server on 127.0.0.1 and then offline runs that never touch it; `prepare`, `cache` and `stage`
on the builtin corpus."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from clustertune.data.builtin import pydoc_paragraphs
from tests.helpers import TINY_CAUSAL, cli, with_
from tests.hubserver import FakeHub


def make_hub(root: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    from clustertune.models.tokenizer import train_bpe

    paras = pydoc_paragraphs()
    data = root / "datasets" / "testorg" / "tiny-corpus" / "data"
    data.mkdir(parents=True)
    (data / "train.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in paras[:400]))
    (data / "validation.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in paras[400:460]))
    model = root / "models" / "testorg" / "tiny-gpt2"
    model.mkdir(parents=True)
    tok = train_bpe(paras[:400], 300, classification=False, model_max_length=64)
    tok.save_pretrained(str(model))
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=len(tok), n_positions=64,
                               bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)).save_pretrained(str(model))


def test_fetch_then_offline_runs_never_touch_the_network(tmp_path: Path) -> None:
    make_hub(tmp_path / "hub")
    recipe = with_(TINY_CAUSAL, model={"config": None, "name_or_path": "testorg/tiny-gpt2", "tokenizer": None,
                                       "config_overrides": {}},
                   data={"dataset": "testorg/tiny-corpus", "block_size": 32},
                   train={"max_steps": 2, "eval_at_start": False, "log_every": 1, "batch_size": 4})
    (tmp_path / "hub.yaml").write_text(yaml.safe_dump(recipe))
    cache = tmp_path / "cache"
    base = {"HF_HOME": str(tmp_path / "hf"), "CLUSTERTUNE_CACHE": str(cache), "CLUSTERTUNE_RUNS": str(tmp_path / "runs")}
    with FakeHub(tmp_path / "hub") as hub:
        online = {**base, "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0"}
        res = cli("fetch", str(tmp_path / "hub.yaml"), "--store", str(tmp_path / "store"), env=online)
        assert res.returncode == 0, res.stderr
        assert "model.name_or_path: testorg/tiny-gpt2 ->" in res.stdout and "data.dataset: testorg/tiny-corpus ->" in res.stdout
        local = tmp_path / "store" / "tiny.yaml"
        written = yaml.safe_load(local.read_text())
        assert written["model"]["name_or_path"] == str(tmp_path / "store" / "models" / "testorg--tiny-gpt2")
        assert written["data"]["dataset"] == str(tmp_path / "store" / "datasets" / "testorg--tiny-corpus")
        assert (tmp_path / "store" / "models" / "testorg--tiny-gpt2" / "model.safetensors").is_file()
        assert (tmp_path / "store" / "datasets" / "testorg--tiny-corpus" / "dataset_dict.json").is_file()
        served = len(hub.requests)
        assert served > 0

        # Offline (hub variables set, endpoint still pointing at the live server): no request at all.
        offline = {**base, "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        prep = cli("prepare", str(local), env=offline)
        assert prep.returncode == 0, prep.stderr
        assert "(cache hit" in prep.stdout  # fetch prepared it: the same fingerprint offline
        run = cli("run", str(local), "--no-progress", env=offline)
        assert run.returncode == 0, run.stderr
        assert "COMPLETED" in run.stdout
        assert len(hub.requests) == served, hub.requests[served:]

        # A recipe that reads the hub dataset directly: online the revision is asked of the hub,
        # offline it is read from the local snapshot; both give the same fingerprint.
        direct = with_(TINY_CAUSAL, data={"dataset": "testorg/tiny-corpus", "block_size": 32})
        (tmp_path / "direct.yaml").write_text(yaml.safe_dump(direct))
        on = cli("prepare", str(tmp_path / "direct.yaml"), env=online)
        assert on.returncode == 0 and "(prepared" in on.stdout, on.stderr
        served = len(hub.requests)
        off = cli("prepare", str(tmp_path / "direct.yaml"), env=offline)
        assert off.returncode == 0, off.stderr
        assert off.stdout.split()[1] == on.stdout.split()[1] and "(cache hit" in off.stdout
        assert len(hub.requests) == served, hub.requests[served:]


def test_cli_prepare_cache_and_stage(tmp_path: Path) -> None:
    env = {"CLUSTERTUNE_CACHE": str(tmp_path / "c")}
    args = ["data.max_eval_samples=8"]
    first = cli("prepare", "quickstart", *args, "--workers", "1", env=env)
    assert first.returncode == 0, first.stderr
    assert "prepared in" in first.stdout and "train " in first.stdout
    fp = first.stdout.split()[1]
    second = cli("prepare", "quickstart", *args, env=env)
    assert f"fingerprint {fp} (cache hit" in second.stdout
    ls = cli("cache", "ls", env=env)
    assert fp in ls.stdout and "builtin:pydoc" in ls.stdout
    st = cli("stage", "quickstart", str(tmp_path / "node"), *args, env=env)
    assert st.returncode == 0 and "staged" in st.stdout, st.stderr
    shard = tmp_path / "c" / fp / "train.input_ids.00000.bin"
    shard.write_bytes(shard.read_bytes()[:-2] + b"\x00\x01")
    bad = cli("cache", "verify", env=env)
    assert bad.returncode == 2 and "checksum error in" in bad.stdout and "--force" in bad.stdout
    rm = cli("cache", "rm", fp[:8], env=env)
    assert rm.returncode == 0 and not (tmp_path / "c" / fp).exists()
