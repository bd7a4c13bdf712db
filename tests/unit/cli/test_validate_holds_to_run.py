"""``validate`` refuses whatever ``run`` refuses without a GPU, the network or the data.

The table holds recipes that ``run`` refuses; each must exit 2 from ``validate`` and from
``run`` naming the same key, leave no run directory behind, and the completeness check fails
when a key that the run's checks raise (before the first step) is in neither the table nor the
list of checks that need the data, a GPU or the network."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustertune.cli.main import main
from tests.helpers import HF_ZERO2, HF_ZERO3, SGD_64, TINY_CAUSAL, TINY_CLS, tree_snapshot, with_

SRC = Path(__file__).resolve().parents[3] / "src" / "clustertune"
Make = Callable[[Path], dict[str, Any]]
LORA = {"type": "lora", "rank": 4, "alpha": 8, "target_modules": ["c_attn"]}


def completed_run(root: Path, name: str, n_positions: int = 64, n_head: int = 2) -> str:
    """A completed run named ``name`` whose final model is a tiny GPT-2 config (no weights: the
    preflight reads configs only)."""
    from transformers import GPT2Config

    from clustertune.runs.run import Run
    from clustertune.runs.state import RunState

    run = Run.create(root, name, "causal_lm", yaml.safe_dump(TINY_CAUSAL), ["test"])
    run.start_attempt()
    run.transition(RunState.COMPLETED)
    GPT2Config(n_layer=2, n_embd=64, n_head=n_head, n_positions=n_positions, vocab_size=512).save_pretrained(run.paths.model)
    return run.id


def sft(d: Path, base: str = "run:base", **data: Any) -> dict[str, Any]:
    (d / "chats.jsonl").write_text('{"messages": [{"role": "user", "content": "a"}, '
                                   '{"role": "assistant", "content": "b"}]}\n' * 8)
    section = {"dataset": None, "train_files": [str(d / "chats.jsonl")], "max_length": 64,
               "sft": {"chat_template": "chatml"}}
    for k, v in data.items():
        section[k] = {**section.get(k, {}), **v} if isinstance(v, dict) else v
    return {"name": "s", "task": "sft", "model": {"name_or_path": base},
            "data": section, "train": {"batch_size": 2, "max_steps": 2, "cpu_threads": 1}}


def grpo(**rl: Any) -> dict[str, Any]:
    return {"name": "g", "task": "rlhf", "data": {"dataset": "builtin:pydoc-prompts"},
            "train": {"batch_size": 4, "max_steps": 2},
            "rl": {"algorithm": "grpo", "policy": "run:base", "num_generations": 2,
                   "rewards": [{"function": "clustertune.rewards:char_fraction"}], **rl}}


def bad_template(d: Path) -> dict[str, Any]:
    (d / "t.jinja").write_text("{% for m in messages %}{{ m['content'] }\n")
    return sft(d, sft={"chat_template": str(d / "t.jinja")})


def no_config_dir(d: Path) -> dict[str, Any]:
    (d / "m").mkdir()
    (d / "m" / "weights.bin").write_bytes(b"x")
    return with_(TINY_CAUSAL, model={"config": None, "name_or_path": str(d / "m")})


def bad_ds_json(d: Path) -> dict[str, Any]:
    (d / "ds.json").write_text("{not json")
    return with_(TINY_CAUSAL, train={"deepspeed_config": str(d / "ds.json")})


def ds_json(content: dict[str, Any], **train: Any) -> Make:
    def make(d: Path) -> dict[str, Any]:
        (d / "ds.json").write_text(json.dumps(content))
        return with_(TINY_CAUSAL, train={"strategy": "deepspeed", "deepspeed_config": str(d / "ds.json"), **train})
    return make


# "Finetuning at scale" guides: no ZeRO, SGD, a global batch of 64.
# A JSON with numbers where the recipe says nothing: they are the run's.
NUMBERS = {"zero_optimization": {"stage": 1},
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1}},
           "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": "auto",
                                                             "warmup_num_steps": 2, "total_num_steps": "auto"}},
           "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5}
# The tiny recipe without its optimizer, schedule and batch keys: left to the JSON.
DS_TRAIN = {"precision": "fp32", "max_steps": 4, "log_every": 2, "cpu_threads": 1}


def ds_beside(content: dict[str, Any], strategy: bool = True, launch: dict[str, Any] | None = None,
              **train: Any) -> Make:
    """A recipe naming its DeepSpeed JSON as users do: a file beside it, by a relative path."""
    def make(d: Path) -> dict[str, Any]:
        (d / "ds.json").write_text(json.dumps(content))
        section = {**DS_TRAIN, **({"strategy": "deepspeed"} if strategy else {}), "deepspeed_config": "ds.json", **train}
        return {**TINY_CAUSAL, "train": section, **({"launch": launch} if launch else {})}
    return make


# (id, recipe made under the case's directory (holding runs/ with a completed run "base"), key named)
TABLE: list[tuple[str, Make, str]] = [
    ("override-unknown-name", lambda d: with_(TINY_CAUSAL, model={"config_overrides": {"n_layers": 2}}),
     "model.config_overrides"),
    ("override-zero-size", lambda d: with_(TINY_CAUSAL, model={"config_overrides": {"n_layer": 0, "n_embd": 64}}),
     "model.config_overrides"),
    ("override-negative-size", lambda d: with_(TINY_CAUSAL, model={"config_overrides": {"n_embd": -64}}),
     "model.config_overrides"),
    ("heads-do-not-divide-width", lambda d: with_(TINY_CAUSAL, model={"config_overrides": {
        "n_layer": 2, "n_embd": 64, "n_head": 3, "n_positions": 64}}), "model.config_overrides"),
    ("bert-heads-do-not-divide-width", lambda d: with_(TINY_CLS, model={"config_overrides": {
        "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 5, "max_position_embeddings": 64}}),
     "model.config_overrides"),
    ("unknown-model-type", lambda d: with_(TINY_CAUSAL, model={"config": "gpt3"}), "model.config"),
    ("block-longer-than-type-default", lambda d: with_(TINY_CAUSAL, model={"config_overrides": {"n_layer": 2}},
                                                        data={"block_size": 4096}), "data.block_size"),
    ("local-dir-without-config", no_config_dir, "model.name_or_path"),
    ("run-base-missing", lambda d: sft(d, base="run:no-such-run"), "model.name_or_path"),
    ("run-base-shorter-than-max-length", lambda d: sft(d, max_length=256), "data.max_length"),
    ("run-base-heads-overridden", lambda d: sft(d) | {"model": {"name_or_path": "run:base",
                                                                "config_overrides": {"n_head": 5}}},
     "model.config_overrides"),
    ("adapter-targets-nothing", lambda d: sft(d) | {"model": {"name_or_path": "run:base",
                                                              "adapter": {**LORA, "target_modules": ["q_proj"]}}},
     "model.adapter.target_modules"),
    ("chat-template-does-not-compile", bad_template, "data.sft.chat_template"),
    ("rl-policy-run-missing", lambda d: grpo(policy="run:no-such-run"), "rl.policy"),
    ("rl-reference-run-missing", lambda d: grpo(reference="run:gone"), "rl.reference"),
    ("rl-reward-model-dir-missing", lambda d: grpo(rewards=[{"model": "./no-classifier", "label": "pos"}]),
     "rl.rewards.0.model"),
    ("rl-reward-function-not-importable", lambda d: grpo(rewards=[{"function": "no_such_module_here:score"}]),
     "rl.rewards.0.function"),
    ("rl-reward-both-and-nan-weight", lambda d: grpo(rewards=[{"function": "clustertune.rewards:char_fraction",
                                                               "model": "./m", "label": "x", "weight": float("nan")}]),
     "rl.rewards.0: set exactly one of function"),
    ("secret-in-launch-env", lambda d: with_(TINY_CAUSAL, launch={"env": {"WANDB_API_KEY": "x"}}), "launch.env"),
    ("deepspeed-json-unreadable", bad_ds_json, "train.deepspeed_config"),
    ("deepspeed-json-offload-contradicted", ds_json({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}},
                                                    offload="none"), "train.deepspeed_config"),
    ("deepspeed-json-zero-one-adam-on-cpu", ds_json({"optimizer": {"type": "ZeroOneAdam"}}, device="cpu"),
     "train.deepspeed_config"),
    # train_batch_size against the plan's processes: 8 x 1 x 2, both set in the recipe.
    ("deepspeed-json-train-batch-size-not-the-plans", ds_beside(SGD_64, launch={"procs_per_node": 2}, batch_size=8,
                                                                gradient_accumulation_steps=1),
     "train_batch_size: 64 in"),
    ("deepspeed-json-train-batch-size-not-a-multiple", ds_beside({**SGD_64, "train_batch_size": 20}, batch_size=8),
     "train_batch_size: 20 in"),
    ("deepspeed-json-bf16-and-fp16", ds_beside({"bf16": {"enabled": True}, "fp16": {"enabled": True}},
                                               precision="auto"), "bf16.enabled and fp16.enabled"),
    ("deepspeed-json-fp16-on-cpu", ds_beside({"fp16": {"enabled": True}}, precision="auto", device="cpu"),
     "fp16.enabled: true in"),
    ("deepspeed-json-warmup-of-no-steps", ds_beside({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}}),
     "warmup_num_steps: 0 in {json}: DeepSpeed needs a whole number of steps, 1 or more"),
    ("tracker-not-installed", lambda d: with_(TINY_CAUSAL, tracking={"trackers": ["wandb"]}), "tracking.trackers"),
    ("metric-not-importable", lambda d: with_(TINY_CLS, train={"metrics": ["no_such_module_here:f1"]}),
     "train.metrics.0"),
    ("recipe-runner-none", lambda d: with_(TINY_CAUSAL, launch={"runner": "none"}), "launch.runner"),
    ("recipe-launch-stage", lambda d: with_(TINY_CAUSAL, launch={"stage": [str(d)]}), "launch.stage: copies paths"),
    ("recipe-runner-srun", lambda d: with_(TINY_CAUSAL, launch={"backend": "slurm", "runner": "srun"}),
     "launch.runner: srun applies to your own command"),
    ("sbatch-extra-output", lambda d: with_(TINY_CAUSAL, launch={"backend": "slurm", "sbatch_extra": ["-o%j.out"]}),
     "launch.sbatch_extra"),
    ("tmp-disk-decimal", lambda d: with_(TINY_CAUSAL, launch={"backend": "slurm", "tmp_disk": "1.5T"}), "launch.tmp_disk"),
]

# Keys the run's checks raise that only the data, a GPU or the network can decide, so no offline
# preflight can: each with why.
NOT_OFFLINE = {
    "data.dataset": "the dataset's rows: read when the data is prepared",
    "data.text_column": "the dataset's columns", "data.label_column": "the dataset's labels",
    "data.sft.chat_template": "the tokenizer's own template, read with the tokenizer",
    "model.tokenizer": "a hub tokenizer or one trained on the data",
    "train.device": "CUDA already started in this process (a library caller's state)",
    "model.adapter": "bitsandbytes on a GPU (QLoRA)",
    "model.name_or_path": "a hub model's weights, downloaded by the run",
    "model.attn_implementation": "a kernel that needs a GPU",
    "rl.policy": "a hub policy or one that is not a causal LM, read when loaded",
    "rl.prompt_column": "the dataset's columns",
    "rl.label_column": "the dataset's labels (KTO: desirable or not)",
    "launch.env_passthrough": "the submitting shell's environment when it launches (the dry run warns)",
    "model": "the weights from_pretrained loads; the structure is built on the meta device (the *-heads-* cases)",
}

# The modules whose typed errors a run raises before its first step.
BEFORE_FIRST_STEP = ["train/preflight.py", "models/build.py", "models/adapters.py", "models/local.py",
                     "recipe/ds_config.py", "recipe/ds_json.py", "train/metrics.py", "launch/submit.py", "recipe/launch_checks.py",
                     "train/rl/sources.py", "data/templates.py"]


@pytest.fixture
def case_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "case"
    d.mkdir()
    monkeypatch.chdir(d)
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(d / "runs"))
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed, whatever this machine has
    completed_run(d / "runs", "base")
    return d


@pytest.mark.parametrize(("make", "key"), [c[1:] for c in TABLE], ids=[c[0] for c in TABLE])
def test_validate_refuses_what_run_refuses_naming_the_same_key(case_dir: Path, capsys: pytest.CaptureFixture[str],
                                                             make: Make, key: str) -> None:
    path = case_dir / "r.yaml"
    path.write_text(yaml.safe_dump(make(case_dir)))
    before = tree_snapshot(case_dir)
    for argv in (["validate", str(path)], ["run", str(path), "--no-progress"], ["run", str(path), "--dry-run"]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        assert key.format(json=case_dir / "ds.json") in err and "Traceback" not in err, (argv, err)
        assert tree_snapshot(case_dir) == before, argv  # no run directory, nothing written


# DeepSpeed JSONs that run: (id, recipe, the train keys of the recipe the run gets). The recipes
# leave the JSON's keys unset (DS_TRAIN), so the JSON decides them.
ACCEPTED: list[tuple[str, Make, dict[str, Any]]] = [
    ("hf-zero2-stock", ds_beside(HF_ZERO2), {"strategy": "deepspeed", "zero_stage": 2, "offload": "optimizer",
                                             "lr_scheduler": "constant", "lr": 5e-5, "batch_size": 8}),
    ("hf-zero3-stock", ds_beside(HF_ZERO3), {"zero_stage": 3, "offload": "params", "lr_scheduler": "linear"}),
    ("the-json-alone-is-strategy-deepspeed", ds_beside(HF_ZERO2, strategy=False), {"strategy": "deepspeed"}),
    # 64 = micro batch x 1 x 2 processes: the micro batch is the JSON's.
    ("sgd-64-over-2-processes", ds_beside(SGD_64, launch={"procs_per_node": 2}),
     {"zero_stage": 0, "lr": 0.05, "batch_size": 32, "gradient_accumulation_steps": 1}),
    # 64 = 8 (the recipe's) x accumulation x 2 processes.
    ("sgd-64-recipe-micro-batch-8", ds_beside(SGD_64, launch={"procs_per_node": 2}, batch_size=8),
     {"batch_size": 8, "gradient_accumulation_steps": 4}),
    ("the-jsons-numbers-where-the-recipe-is-silent", ds_beside(NUMBERS),
     {"zero_stage": 1, "lr": 1e-3, "adam_beta1": 0.8, "adam_beta2": 0.95, "adam_eps": 1e-6, "weight_decay": 0.1,
      "lr_scheduler": "linear", "warmup_steps": 2, "batch_size": 4, "gradient_accumulation_steps": 2,
      "max_grad_norm": 0.5}),
    # No recipe schedule is DeepSpeed's OneCycle: the recipe's lr_scheduler (unset) does not apply.
    ("one-cycle-has-no-recipe-schedule", ds_beside({"scheduler": {"type": "OneCycle", "params": {
        "cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_first_step_size": 2}}}), {"lr_scheduler": "linear"}),
    ("bf16-in-the-json-is-precision-auto", ds_beside({"bf16": {"enabled": True}}, precision="auto"),
     {"precision": "bf16"}),
    ("no-16-bit-in-the-json-is-fp32", ds_beside({"bf16": {"enabled": False}, "fp16": {"enabled": False}},
                                                precision="auto"), {"precision": "fp32"}),
]


def deepspeed_reads(cfg: dict[str, Any], world: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepSpeed's own reading of ``cfg`` on ``world`` processes, as ``deepspeed.initialize`` reads
    it (its batch arithmetic), and its scheduler built over an optimizer (its parameter checks)."""
    if importlib.util.find_spec("deepspeed") is None:
        return  # the arithmetic above stands for it
    import torch
    from deepspeed.runtime import config as ds, lr_schedules

    monkeypatch.setattr(ds.dist, "get_rank", lambda *a, **k: 0)
    monkeypatch.setattr(ds.dist, "get_world_size", lambda *a, **k: world)
    read = ds.DeepSpeedConfig(json.loads(json.dumps(cfg)))
    assert read.train_batch_size == cfg["train_batch_size"]
    assert read.train_micro_batch_size_per_gpu == cfg["train_micro_batch_size_per_gpu"]
    if "scheduler" in cfg:
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg["optimizer"]["params"]["lr"])
        getattr(lr_schedules, cfg["scheduler"]["type"])(opt, **cfg["scheduler"]["params"])


@pytest.mark.parametrize(("make", "expected"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_validate_accepts_what_the_run_trains_and_the_run_gets_the_recipe_it_accepted(
        case_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        make: Make, expected: dict[str, Any]) -> None:
    from clustertune import api
    from clustertune.launch.decision import planned_world_size
    from clustertune.recipe.load import dump_recipe, load_recipe
    from clustertune.recipe.ds_config import deepspeed_config
    from clustertune.train.precision import mixed_precision

    path = case_dir / "r.yaml"
    path.write_text(yaml.safe_dump(make(case_dir)))
    for argv in (["validate", str(path)], ["run", str(path), "--dry-run"]):
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    # The recipe run hands to its backend (and writes into the run directory) is validate's.
    recipe = api.decide(str(path), dry=True).recipe
    assert recipe == api.validate(str(path)).recipe
    assert {k: getattr(recipe.train, k) for k in expected} == expected
    # The nodes read it back with every key written, build the config, and find nothing to change.
    node = load_recipe(yaml.safe_load(dump_recipe(recipe)))
    world = planned_world_size(node)
    cfg = deepspeed_config(node, world, mixed_precision(node), total_steps=4, hidden_size=64, cuda=False)
    assert '"auto"' not in json.dumps(cfg), cfg
    t = node.train
    assert cfg["train_batch_size"] == t.batch_size * t.gradient_accumulation_steps * world
    assert (cfg["train_micro_batch_size_per_gpu"], cfg["gradient_accumulation_steps"]) == (
        t.batch_size, t.gradient_accumulation_steps)
    deepspeed_reads(cfg, world, monkeypatch)


def test_only_a_key_set_explicitly_may_contradict_the_json(case_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The recipe's defaults follow the JSON; a key set in the YAML or as an override may restate
    it, and a different value is refused by validate and run alike, naming both places."""
    path = case_dir / "r.yaml"
    path.write_text(yaml.safe_dump(ds_beside(NUMBERS)(case_dir)))
    before = tree_snapshot(case_dir)
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert main(["validate", str(path), "train.lr=0.001", "train.batch_size=4"]) == 0, capsys.readouterr().err
    for override, said in [("train.lr=3e-4", "optimizer.params.lr: 0.001 in {json}, but 0.0003 from train.lr"),
                           ("train.batch_size=8", "train_micro_batch_size_per_gpu: 4 in {json}, but 8 from train.batch_size"),
                           ("train.lr_scheduler=cosine", "scheduler.type: 'WarmupDecayLR' in {json} (linear), but 'cosine'"),
                           ("train.max_grad_norm=1.0", "gradient_clipping: 0.5 in {json}, but 1.0 from train.max_grad_norm")]:
        for argv in (["validate", str(path), override], ["run", str(path), override, "--no-progress"]):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert said.format(json=case_dir / "ds.json") in err and "remove the key from the recipe" in err, (argv, err)
    assert tree_snapshot(case_dir) == before  # no run directory, nothing written


def test_every_problem_at_once(case_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Schema, model, secret and tracker problems in one recipe: one report with all of them."""
    recipe = with_(TINY_CAUSAL, model={"config_overrides": {"n_layer": 2, "n_embd": 64, "n_head": 3, "n_positions": 64}},
                   launch={"env": {"HF_TOKEN": "x"}}, tracking={"trackers": ["wandb"]}, train={"lr": -1.0, "batch_sise": 8})
    (case_dir / "r.yaml").write_text(yaml.safe_dump(recipe))
    assert main(["validate", str(case_dir / "r.yaml"), "data.block_size=128"]) == 2
    err = capsys.readouterr().err
    for said in ("train.lr", "train.batch_sise: unknown key", "launch.env: HF_TOKEN", "model.config_overrides: the gpt2 "
                 "model cannot be built", "tracking.trackers", "<override data.block_size=128>: data.block_size"):
        assert said in err, err
    assert "recipe has 6 problems" in err, err
    assert re.search(r"r\.yaml:\d+: model\.config_overrides", err), err  # the file and the line


def test_a_missing_shipped_base_is_trained_first_so_validate_says_what_it_did_not_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(tmp_path / "runs"))
    assert main(["validate", "sft-demo"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 2 and "not checked offline: model.name_or_path: run:quickstart" in out, out
    # prepare and estimate-memory need the base now: exit 2, naming it and how to make it.
    for argv in (["prepare", "sft-demo"], ["estimate-memory", "sft-demo"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "model.name_or_path: no run 'quickstart'" in err and "`clustertune run quickstart`" in err, err


def test_a_missing_shipped_policy_is_trained_first_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """RL starts from another run's model as SFT does: `rl.policy: run:quickstart` (the RL starters
    and the shipped offline RL recipes) validates before the quickstart run exists."""
    from clustertune import api
    from clustertune.errors import RecipeError

    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(tmp_path / "runs"))
    assert main(["validate", "rlhf-dpo-offline"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "not checked offline: rl.policy: run:quickstart" in out and "`clustertune run quickstart`" in out, out
    with pytest.raises(RecipeError, match=r"rl\.policy: no run 'quickstart'.*`clustertune run quickstart`"):
        api.validate("rlhf-dpo-offline", need_base=True)  # prepare and estimate-memory need it now
    # a run that is no shipped recipe's is an error as before
    with pytest.raises(RecipeError, match=r"rl\.policy: no run 'nosuch'"):
        api.validate("rlhf-dpo-offline", ["rl.policy=run:nosuch"])


def test_a_hub_model_with_nothing_cached_is_one_line_not_checked(capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    assert main(["validate", "gpt2-wikitext2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("not checked offline: model.name_or_path: 'gpt2' is a hub model")


@pytest.mark.parametrize("name", ["quickstart", "sft-demo", "pydoc-kinds", "bert-yelp", "gpt2-wikitext2",
                                  "gpt2-wikitext2-slurm", "gpt2-wikitext2-ssh", "rlhf-grpo-offline",
                                  "rlhf-dpo-offline", "rlhf-gpt2-sentiment", "reward-model-offline"])
def test_every_shipped_recipe_validates_once_its_base_run_exists(name: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(tmp_path / "runs"))
    completed_run(tmp_path / "runs", "quickstart", n_positions=128)
    assert main(["validate", name]) == 0, capsys.readouterr().err


def test_the_shipped_set_is_the_one_tested() -> None:
    from clustertune.recipe.load import shipped_recipes

    params = next(m for m in test_every_shipped_recipe_validates_once_its_base_run_exists.pytestmark
                  if m.name == "parametrize").args[1]
    assert sorted(params) == sorted(shipped_recipes())


def test_the_table_covers_every_key_the_runs_checks_raise() -> None:
    """A refusal added to the run's checks (a typed error naming a key) without a table case or
    a reason it needs the data, a GPU or the network fails here."""
    raised = set()
    pattern = re.compile(r"raise \w+Error\(\s*f?[\"']((?:model|data|train|launch|tracking|rl)(?:\.[a-z_0-9]+)*)[:{ ]")
    for rel in BEFORE_FIRST_STEP:
        raised.update(pattern.findall((SRC / rel).read_text(encoding="utf-8")))
    covered = {re.split(r"[: ]", key)[0] for _, _, key in TABLE} | set(NOT_OFFLINE)
    missing = sorted(k for k in raised if not any(k == c or k.startswith(c + ".") for c in covered))
    assert not missing, f"keys the run refuses that the table does not hold: {missing}"
    assert len(raised) >= 8  # the pattern still finds the run's refusals
