"""Bad input through the CLI app in this process: exit 2, one message that names the key or
path, no traceback, and nothing written (no run directory, no saved cluster, no file changed).

Every case takes its own key, path or code path. A case is ``(id, setup, says)``: ``setup(d)``
writes what the case needs under ``d`` and returns the command line; ``says`` must appear in
the message. A few commands run as real processes at the end (the console entry point)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustertune.cli.main import main
from clustertune.extras import install_hint
from tests.helpers import TINY_CAUSAL, TINY_CLS, cli, tree_snapshot, with_

Setup = Callable[[Path], list[str]]


def recipe_file(d: Path, recipe: dict[str, Any], name: str = "r.yaml") -> str:
    (d / name).write_text(yaml.safe_dump(recipe))
    return str(d / name)


def run(*overrides: str, base: dict[str, Any] = TINY_CAUSAL) -> Setup:
    """``clustertune run`` of a tiny recipe with these overrides."""
    return lambda d: ["run", recipe_file(d, base), *overrides, "--no-progress"]


def run_with(base: dict[str, Any] = TINY_CAUSAL, **sections: Any) -> Setup:
    return lambda d: ["run", recipe_file(d, with_(base, **sections)), "--no-progress"]


def raw_recipe(content: bytes | str, command: str = "run") -> Setup:
    def setup(d: Path) -> list[str]:
        p = d / "raw.yaml"
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        return [command, str(p)] + (["--no-progress"] if command == "run" else [])
    return setup


def write(p: Path, content: bytes | str | list[dict[str, Any]]) -> Path:
    if isinstance(content, list):
        content = "".join(json.dumps(row) + "\n" for row in content)
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


def files(content: Any, suffix: str = ".jsonl", base: dict[str, Any] = TINY_CAUSAL,
          validation: Any = None, **data: Any) -> Setup:
    """``clustertune run`` on one local train file (and a validation file) holding ``content``."""
    def setup(d: Path) -> list[str]:
        section = {"dataset": None, "train_files": [str(write(d / f"train{suffix}", content))], **data}
        if validation is not None:
            section["validation_files"] = [str(write(d / "validation.jsonl", validation))]
        return ["run", recipe_file(d, with_(base, data=section)), "--no-progress"]
    return setup


def chunked(content: Any, suffix: str = ".jsonl") -> Setup:
    """Train and validation files read a chunk at a time: a local tokenizer directory (made here
    from a few lines), so no tokenizer is trained on the files themselves."""
    def setup(d: Path) -> list[str]:
        from clustertune.models.tokenizer import train_bpe

        train_bpe([t["text"] for t in TEXTS], 300, classification=False, model_max_length=64).save_pretrained(str(d / "tok"))
        train = d / f"train{suffix}"
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table(content), train)
        else:
            write(train, content)
        val = write(d / "validation.jsonl", TEXTS[:5])
        recipe = with_(TINY_CAUSAL, model={"tokenizer": str(d / "tok")},
                       data={"dataset": None, "train_files": [str(train)], "validation_files": [str(val)]})
        return ["run", recipe_file(d, recipe), "--no-progress"]
    return setup


def model_dir(config_json: bytes | str, key: str) -> Setup:
    def setup(d: Path) -> list[str]:
        (d / "m").mkdir()
        write(d / "m" / "config.json", config_json)
        model = {"config": str(d / "m")} if key == "config" else {"config": None, "name_or_path": str(d / "m")}
        return ["run", recipe_file(d, with_(TINY_CAUSAL, model=model)), "--no-progress"]
    return setup


def command(*argv: str) -> Setup:
    """Any command line; ``{d}`` in an argument is the case's directory."""
    return lambda d: [a.replace("{d}", str(d)) for a in argv]


def with_runs(argv: Callable[[dict[str, str]], list[str]]) -> Setup:
    """A command about existing runs (made here, their state set by hand), by name -> id."""
    def setup(d: Path) -> list[str]:
        from clustertune.runs.run import Run
        from clustertune.runs.state import RunState

        root, text = d / "runs", yaml.safe_dump(TINY_CAUSAL)
        done = Run.create(root, "done", "causal_lm", text, ["test"])
        done.start_attempt()
        done.transition(RunState.COMPLETED)
        busy = Run.create(root, "busy", "causal_lm", text, ["test"])
        busy.start_attempt()  # this process's pid: alive, so it stays RUNNING
        broken = Run.create(root, "broken", "causal_lm", text, ["test"])
        broken.paths.run_json.write_text("{cut off")
        return [a.replace("{d}", str(d)) for a in argv({"done": done.id, "busy": busy.id, "broken": broken.id})]
    return setup


def with_script_runs(argv: Callable[[dict[str, str]], list[str]]) -> Setup:
    """A command about runs of a user's own command (`clustertune launch -- true`), by state -> id."""
    def setup(d: Path) -> list[str]:
        from clustertune.launch.command import create_run, load_launch
        from clustertune.runs.state import RunState

        ids = {}
        for state in (RunState.COMPLETED, RunState.RUNNING):
            r = create_run(load_launch(None, [], ["true"]), ["true"], d / "runs", ["test"])
            r.start_attempt()  # this process's pid: alive, so a RUNNING one stays RUNNING
            if state is not RunState.RUNNING:
                r.transition(state)
            ids[state.value] = r.id
        return argv(ids)
    return setup


def grpo(*overrides: str) -> Setup:
    recipe = {"name": "g", "task": "rlhf", "data": {"dataset": "builtin:pydoc-prompts"}, "train": {"batch_size": 8, "max_steps": 2},
              "rl": {"algorithm": "grpo", "policy": "./no-policy-here", "rewards": [{"function": "clustertune.rewards:char_fraction"}]}}
    return lambda d: ["run", recipe_file(d, recipe), *overrides, "--no-progress"]


def cache_dir_with_stray(*argv: str) -> Setup:
    def setup(d: Path) -> list[str]:
        (d / "cache" / "deadbeef00").mkdir(parents=True)
        (d / "cache" / "deadbeef00" / "notes.txt").write_text("not prepared data")
        return [*argv, "--cache-dir", str(d / "cache")]
    return setup


def bad_clusters_file(d: Path) -> list[str]:
    (d / "cfg").mkdir()
    (d / "cfg" / "clusters.yaml").write_text("clusters: [")
    return ["cluster", "ls"]


def clusters_file(content: bytes | str, *argv: str) -> Setup:
    def setup(d: Path) -> list[str]:
        (d / "cfg").mkdir()
        write(d / "cfg" / "clusters.yaml", content)
        return list(argv)
    return setup


def on_a_cluster(*argv: str) -> Setup:
    """A command about a saved cluster of one host (never reached: the command stops first)."""
    def setup(d: Path) -> list[str]:
        assert main(["cluster", "add", "lc", "127.0.0.1"]) == 0
        return [a.replace("{d}", str(d)) for a in argv]
    return setup


def symlink_loop(p: Path) -> None:
    os.symlink(p, p)


def train_file(make: Callable[[Path], None]) -> Setup:
    def setup(d: Path) -> list[str]:
        make(d / "train.jsonl")
        return files_at(d, d / "train.jsonl")
    return setup


def dataset_is_a_file(d: Path) -> list[str]:
    (d / "chats.jsonl").write_text('{"text": "a"}\n')
    return run(f"data.dataset={d / 'chats.jsonl'}")(d)


def files_at(d: Path, *paths: Path) -> list[str]:
    recipe = with_(TINY_CAUSAL, data={"dataset": None, "train_files": [str(p) for p in paths]})
    return ["run", recipe_file(d, recipe), "--no-progress"]


def two_train_files(d: Path) -> list[str]:
    return files_at(d, write(d / "a.jsonl", TEXTS), write(d / "b.jsonl", [{"body": t["text"]} for t in TEXTS]))


def wordpiece_model(d: Path) -> list[str]:
    """A tiny GPT-2 whose tokenizer is a WordPiece model (BERT's kind), exported as GGUF."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([t["text"] for t in TEXTS], trainers.WordPieceTrainer(vocab_size=80, special_tokens=["[UNK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    GPT2LMHeadModel(GPT2Config(vocab_size=len(fast), n_layer=1, n_embd=16, n_head=2, n_positions=16,
                                      bos_token_id=0, eos_token_id=0)).save_pretrained(d / "wp")
    fast.save_pretrained(d / "wp")
    return ["export", str(d / "wp"), "--format", "gguf", "--to", str(d / "out")]


def ds_json_run(content: dict[str, Any], *overrides: str) -> Setup:
    """``clustertune run`` under DeepSpeed with ``content`` as the user's DeepSpeed JSON."""
    def setup(d: Path) -> list[str]:
        path = write(d / "ds.json", json.dumps(content))
        return run("train.strategy=deepspeed", f"train.deepspeed_config={path}", *overrides)(d)
    return setup


def validate(*overrides: str, base: dict[str, Any] = TINY_CAUSAL) -> Setup:
    """``clustertune validate`` of a tiny recipe with these overrides."""
    return lambda d: ["validate", recipe_file(d, base), *overrides]


def on_base(verb: str, base: str = "run:no-such-base", template: str | None = None, *overrides: str) -> Setup:
    """``verb`` (validate, prepare, estimate-memory, run) of an SFT recipe on ``base``, with a
    chat template file holding ``template`` when given."""
    def setup(d: Path) -> list[str]:
        chats = write(d / "chats.jsonl", [{"messages": [{"role": "user", "content": "a"},
                                                        {"role": "assistant", "content": "b"}]}] * 4)
        sft = {"chat_template": str(write(d / "t.jinja", template)) if template else "chatml"}
        recipe = {"name": "s", "task": "sft", "model": {"name_or_path": base},
                  "data": {"train_files": [str(chats)], "max_length": 64, "sft": sft}, "train": {"max_steps": 2}}
        return [verb, recipe_file(d, recipe), *overrides] + (["--no-progress"] if verb == "run" else [])
    return setup


def rl_validate(*overrides: str) -> Setup:
    """``clustertune validate`` of a GRPO recipe whose policy is a run that is not there."""
    return lambda d: ["validate", grpo()(d)[1], "rl.policy=run:no-such-policy", *overrides]


TEXTS = [{"text": f"line {i} of some text to train on, long enough to fill a block or two"} for i in range(40)]
LABELLED = [{"text": f"example {i}", "label": i % 2} for i in range(40)]

CASES: list[tuple[str, Setup, str]] = [
    # The recipe file itself
    ("recipe-not-utf8", raw_recipe(b"\xff\xfe\x00\x01name: x\n"), "is not a UTF-8 text file"),
    ("duplicate-yaml-key", raw_recipe(yaml.safe_dump(TINY_CAUSAL) + "name: other\n"), "key 'name' appears twice"),
    ("malformed-yaml", raw_recipe("name: [x\n", "validate"), "malformed YAML at line 2"),
    ("recipe-is-a-list", raw_recipe("- a\n- b\n", "validate"), "a recipe is a mapping of sections, got list"),
    ("recipe-missing", command("validate", "{d}/nope.yaml"), "no recipe file or shipped recipe named"),
    ("shipped-recipe-typo", command("validate", "quickstrat"), "Did you mean 'quickstart'?"),
    ("recipe-is-a-directory", command("validate", "{d}"), "is a directory, not a YAML file"),
    ("unknown-section", run("modle.config=gpt2"), "modle: unknown key (did you mean 'model'?)"),
    ("unknown-train-key", run("train.learning_rate=1e-3"), "train.learning_rate: unknown key"),
    ("override-without-equals", run("train.lr"), "train.lr: override must look like key=value"),
    ("override-below-a-value", run("train.lr.x=1"), "train.lr.x cannot be set below it"),
    ("section-as-a-number", run("train=5"), "train: Input should be a valid dictionary"),
    ("unknown-task", run("task=translation"), "task: Input should be"),
    # model
    ("pretrained-and-fresh", run("model.name_or_path=gpt2"), "set exactly one of model.name_or_path"),
    ("model-type-typo", run("model.config=gtp2"), "did you mean 'gpt2'"),
    ("model-config-file-missing", run("model.config=./nope/config.json"), "model.config: './nope/config.json' does not exist"),
    ("model-config-not-json", lambda d: run(f"model.config={write(d / 'c.json', '{cut')}")(d), "is not a readable JSON config"),
    ("model-dir-config-unreadable", model_dir("{cut off", "config"), "config.json cannot be read as a model config"),
    ("pretrained-config-unreadable", model_dir(b'{"model_type": "gpt2\xff"}', "name_or_path"), "model.name_or_path: "),
    ("pretrained-config-unknown-type", model_dir('{"model_type": "nope"}', "name_or_path"), "cannot be read as a model config"),
    ("pretrained-dir-missing", run("model.config=null", "model.name_or_path=./no-such-dir/"), "model.name_or_path: directory"),
    ("config-override-unknown", run("model.config_overrides.n_lyer=2"), "did you mean 'n_layer'?"),
    ("config-override-text-for-int", run("model.config_overrides.n_layer=two"), "model.config_overrides.n_layer: 'two'"),
    ("negative-n-layer", run("model.config_overrides.n_layer=-1"), "n_layer=-1"),
    ("zero-heads", run("model.config_overrides.n_head=0"), "n_head=0"),
    ("vocab-too-small", run("model.tokenizer_vocab_size=10"), "model.tokenizer_vocab_size"),
    ("tokenizer-dir-missing", run("model.tokenizer=./no-tokenizer/"), "model.tokenizer: directory"),
    ("one-label", run("model.num_labels=1"), "model.num_labels"),
    ("adapter-on-fresh-model", run("model.adapter={type: lora}"), "model.adapter: an adapter trains on top"),
    ("adapter-rank-0", run("model.adapter.rank=0"), "model.adapter.rank"),
    ("adapter-type-unknown", run("model.adapter.type=ia3"), "model.adapter.type"),
    ("adapter-rank-boolean", run("model.adapter.rank=true"), "model.adapter.rank: Value error, expected a number, got a boolean"),
    ("sft-with-trained-tokenizer", run("task=sft"), "its own tokenizer; 'train' is for models"),  # not cut at ';'
    # data: the recipe
    ("dataset-and-files", run("data.train_files=[a.txt]"), "set exactly one of data.dataset and data.train_files"),
    ("validation-files-alone", run("data.validation_files=[a.txt]"), "data.validation_files: only valid together"),
    ("block-beyond-positions", run("data.block_size=128"), "data.block_size: 128 is longer than the 64 positions"),
    ("huge-block-size", run("data.block_size=1e11"), "data.block_size"),
    ("validation-fraction-1", run("data.validation_fraction=1"), "data.validation_fraction"),
    ("streaming-a-builtin", run("data.streaming=true"), "stream beside; prepare them instead"),
    ("unknown-builtin", run("data.dataset=builtin:nope"), "unknown builtin corpus 'builtin:nope'"),
    ("hub-dataset-offline", run("data.dataset=wikitext"), "data.dataset: cannot resolve 'wikitext'"),
    ("dataset-path-missing", run("data.dataset=./no-data/"), "data.dataset: directory './no-data/' does not exist"),
    ("dataset-is-a-file", dataset_is_a_file, "chats.jsonl' is a file; local files go in data.train_files"),
    ("dataset-dir-not-saved", lambda d: run(f"data.dataset={d}")(d), "was not written by datasets' save_to_disk"),
    ("text-column-missing", run("data.text_column=body"), "column 'body' not in the train data"),
    ("sft-format-unknown", run("data.sft.format=chatml"), "data.sft.format"),
    ("sft-max-new-tokens-boolean", run("data.sft.max_new_tokens=true"), "data.sft.max_new_tokens: Value error, expected a number"),
    # data: the files
    ("train-file-missing", run("data.dataset=null", "data.train_files=[./nope.jsonl]"), "data.train_files.0: file './nope.jsonl' does not exist (relative paths start at"),
    ("train-file-fifo", train_file(lambda p: os.mkfifo(p)), "not a regular file"),
    ("train-file-directory", train_file(lambda p: p.mkdir()), "is not a regular file; give a .txt"),
    ("train-file-symlink-loop", train_file(symlink_loop), "cannot be opened"),
    ("jsonl-not-utf8", files(b'{"text": "caf\xe9 au lait"}\n' * 40), "is not UTF-8 text (line 1, byte 14"),
    ("txt-not-utf8", files(b"fine\ncaf\xe9\n" * 20, ".txt"), "is not UTF-8 text (line 2, byte 4"),
    ("csv-not-utf8", files(b"text\ncaf\xe9\n", ".csv"), "is not UTF-8 text"),
    ("text-column-of-numbers", files([{"text": i} for i in range(100)]), "column 'text' of the train data holds numbers"),
    ("text-column-of-nulls", files([{"text": None}] * 20), "holds no text: every value is null"),
    ("text-column-of-lists", files([{"text": ["a", "b"]}] * 20), "holds lists"),
    ("empty-jsonl", files(""), "train.jsonl' is empty"),
    ("blank-lines-only", files("\n\n\n"), "holds no example (blank lines only?)"),
    ("empty-txt", files("", ".txt"), "train.txt' is empty"),
    ("jsonl-not-json", files("hello\nworld\n"), "train.jsonl': 2 line(s) are not JSON objects:\n  line 1 is not JSON"),
    ("json-not-json", files("{cut", ".json"), "as json: "),
    ("csv-empty", files("", ".csv"), "as csv: "),
    ("csv-without-the-column", files("a,b\n" + "1,2\n" * 20, ".csv"), "its columns are a, b"),
    ("parquet-that-is-not", files("not parquet", ".parquet"), "as parquet: "),
    ("unsupported-extension", files("x", ".xlsx"), "unsupported extension .xlsx"),
    ("no-extension", files("x", ""), "unsupported extension (none)"),
    ("train-files-different-columns", two_train_files, "the files have different columns"),
    ("validation-file-other-columns", files(TEXTS, validation=[{"body": "x"}] * 5), "not in the validation data"),
    ("label-out-of-range", files([{**r, "label": 2} for r in LABELLED], base=TINY_CLS), "label 2, outside 0..1"),
    ("label-not-an-integer", files([{**r, "label": 0.5} for r in LABELLED], base=TINY_CLS), "label 0.5 (float); labels must be all integers"),
    ("label-column-missing", files(TEXTS, base=TINY_CLS), "data.label_column: column 'label' not in"),
    # data: files read a chunk at a time
    ("chunked-numbers", chunked([{"text": i} for i in range(50)]), "holds numbers (int64)"),
    ("chunked-not-utf8", chunked(b'{"text": "ok"}\n{"text": "caf\xe9"}\n'), "is not UTF-8 text (line 2"),
    ("chunked-parquet-numbers", chunked({"text": list(range(50))}, ".parquet"), "holds numbers (int64)"),
    ("chunked-empty-txt", chunked("", ".txt"), "train.txt' is empty"),
    # train
    ("negative-seed", run("train.seed=-1"), "train.seed"),
    ("seed-too-large", run("train.seed=4294967296"), "train.seed"),
    ("boolean-batch-size", run("train.batch_size=true"), "train.batch_size"),
    ("boolean-max-steps", run("train.max_steps=false"), "train.max_steps"),
    ("infinite-lr", run("train.lr=.inf"), "train.lr"),
    ("lr-as-a-word", run("train.lr=fast"), "train.lr: Input should be a valid number"),
    ("nan-weight-decay", run("train.weight_decay=.nan"), "train.weight_decay"),
    ("nan-warmup-ratio", run("train.warmup_ratio=.nan"), "train.warmup_ratio"),
    ("infinite-adam-eps", run("train.adam_eps=.inf"), "train.adam_eps"),
    ("beta-1", run("train.adam_beta1=1"), "train.adam_beta1"),
    ("infinite-grad-clip", run("train.max_grad_norm=.inf"), "train.max_grad_norm"),
    ("infinite-epochs", run("train.epochs=.inf", "train.max_steps=null"), "train.epochs"),
    ("unknown-scheduler", run("train.lr_scheduler=step"), "train.lr_scheduler"),
    ("unknown-strategy", run("train.strategy=megatron"), "train.strategy"),
    ("zero-stage-under-ddp", run("train.zero_stage=2"), "train.zero_stage: only used with train.strategy=deepspeed"),
    ("offload-under-ddp", run("train.offload=optimizer"), "train.offload: offloading needs"),
    ("cuda-graphs-under-fsdp", run("train.compile_mode=reduce-overhead", "train.strategy=fsdp"),
     "train.compile_mode: reduce-overhead replays CUDA graphs"),
    ("group-blocks-by-length", run("train.group_by_length=true"),
     "train.group_by_length: task causal_lm trains on rows of one length"),
    ("preset-contradicted", run("train.strategy=deepspeed", "train.deepspeed_preset=zero2-offload", "train.zero_stage=3"),
     "contradicts deepspeed_preset"),
    ("deepspeed-json-missing", run("train.strategy=deepspeed", "train.deepspeed_config=./ds.json"), "train.deepspeed_config"),
    ("deepspeed-json-stage-contradicted", ds_json_run({"zero_optimization": {"stage": 3}}, "train.zero_stage=2"),
     "zero_optimization.stage: 3 in {d}/ds.json, but 2 from train.zero_stage"),
    ("deepspeed-json-lamb-on-cpu", ds_json_run({"optimizer": {"type": "Lamb"}}, "train.device=cpu"),
     "optimizer.type: 'Lamb' in {d}/ds.json runs only on CUDA GPUs"),
    ("precision-unknown", run("train.precision=fp8"), "train.precision"),
    ("keep-no-checkpoint", run("train.keep_last=0"), "train.keep_last"),
    # launch
    ("unknown-backend", run("launch.backend=k8s"), "launch.backend"),
    ("two-nodes-locally", run("launch.nodes=2"), "launch.nodes: more than one node needs"),
    ("ssh-without-cluster", run("launch.backend=ssh"), "launch.cluster: launch.backend=ssh needs a cluster"),
    ("ssh-unknown-cluster", run("launch.backend=ssh", "launch.cluster=nocl"), "launch.cluster: no cluster 'nocl'"),
    ("gres-with-a-space", run("launch.gres=gpu 8"), "launch.gres"),
    ("signal-unknown", run("launch.signal=whenever"), "launch.signal"),
    ("env-as-a-list", run("launch.env=[a]"), "launch.env"),
    ("no-processes", run("launch.procs_per_node=0"), "launch.procs_per_node"),
    ("more-processes-than-cores", run("launch.procs_per_node=4096"), "launch.procs_per_node=4096"),
    ("cpus-per-gpu-and-per-task", run("launch.cpus_per_gpu=2", "launch.cpus_per_task=4"), "launch.cpus_per_gpu: SLURM refuses"),
    ("sbatch-extra-error-log", run("launch.backend=slurm", "launch.sbatch_extra=['-e %j.err']"),
     "launch.sbatch_extra: '-e %j.err': the job's logs are set by clustertune"),
    ("sbatch-extra-job-name", run("launch.backend=slurm", "launch.sbatch_extra=[--job-name=gpt2_multi]"),
     "is set through launch.job_name"),
    ("tmp-disk-in-gib", run("launch.backend=slurm", "launch.tmp_disk=1500GiB"), "launch.tmp_disk: '1500GiB' is not a SLURM disk size"),
    ("secret-in-env", run("launch.procs_per_node=2", "launch.env={DB_PASS: x}"), "launch.env: DB_PASS"),
    ("passthrough-unset", run("launch.procs_per_node=2", "launch.env_passthrough=[CT_TEST_UNSET_VAR]"), "launch.env_passthrough: CT_TEST_UNSET_VAR"),
    # tracking
    ("unknown-tracker", run("tracking.trackers=[comet]"), "tracking.trackers.0"),
    ("runs-root-is-a-file", lambda d: run(f"tracking.runs_root={write(d / 'f', 'x')}")(d), "cannot hold runs"),
    # rl
    ("rl-outside-rlhf", run("rl={policy: x}"), "rl: only valid with task: rlhf"),
    ("rl-policy-missing", grpo(), "rl.policy: directory './no-policy-here' does not exist"),
    ("rl-reward-not-module-attr", grpo("rl.rewards=[{function: nomodule}]"), "rl.rewards.0.function"),
    ("rl-reward-weight-boolean", grpo("rl.rewards=[{function: len, weight: true}]"), "rl.rewards.0.weight"),
    ("rl-batch-not-a-multiple", grpo("train.batch_size=6"), "train.batch_size: 6 completions per step"),
    ("rl-dpo-with-rewards", grpo("rl.algorithm=dpo"), "rl.rewards: DPO learns from preference data"),
    ("rl-value-model-outside-ppo", grpo("rl.value_model=x"), "rl.value_model: only used by algorithm: ppo"),
    ("rl-ppo-with-a-trlx-reward-function", grpo("rl.algorithm=ppo"),
     "rl.rewards.0.function: TRL's PPO takes a reward model, not a reward function (a TRLX reward_fn is one); the same "
     "rewards run under GRPO or RLOO, several processes too: {rl: {algorithm: grpo, rewards: [{function: "
     "'clustertune.rewards:char_fraction'}]}}"),
    ("rl-one-generation", grpo("rl.num_generations=1"), "rl.num_generations"),
    # what validate, --dry-run, prepare and estimate-memory refuse as run does (no GPU, no network)
    ("heads-do-not-divide-width", run("model.config_overrides.n_head=3"),
     "model.config_overrides: the gpt2 model cannot be built from this config"),
    ("validate-heads-do-not-divide-width", validate("model.config_overrides.n_head=3"), "n_head=3>: model.config_overrides"),
    ("dry-run-heads-do-not-divide-width", lambda d: [*run("model.config_overrides.n_head=3")(d), "--dry-run"],
     "must be divisible by num_heads"),
    ("estimate-memory-heads-do-not-divide", lambda d: ["estimate-memory", recipe_file(d, TINY_CAUSAL),
                                                       "model.config_overrides.n_head=5"], "model.config_overrides"),
    ("prepare-heads-do-not-divide", lambda d: ["prepare", recipe_file(d, TINY_CAUSAL), "model.config_overrides.n_head=5"],
     "model.config_overrides: the gpt2 model cannot be built"),
    ("validate-config-override-plural", validate("model.config_overrides.n_layers=2"), "did you mean 'n_layer'?"),
    ("validate-zero-width", validate("model.config_overrides.n_embd=0"), "n_embd=0: sizes and counts must be at least 1"),
    ("validate-block-beyond-positions", validate("data.block_size=128"), "data.block_size: 128 is longer than the 64"),
    ("validate-secret-in-env", validate("launch.env={HF_TOKEN: x}"), "launch.env: HF_TOKEN look(s) like secrets"),
    ("validate-deepspeed-json-missing", validate("train.strategy=deepspeed", "train.deepspeed_config=./ds.json"),
     "train.deepspeed_config: './ds.json' does not exist"),
    ("validate-base-run-missing", on_base("validate"), "model.name_or_path: no run 'no-such-base'"),
    ("run-base-run-missing", on_base("run"), "model.name_or_path: no run 'no-such-base'"),
    ("prepare-base-run-missing", on_base("prepare"), "model.name_or_path: no run 'no-such-base'"),
    ("estimate-memory-base-run-missing", on_base("estimate-memory"), "model.name_or_path: no run 'no-such-base'"),
    ("validate-base-dir-missing", on_base("validate", "./no-base-here/"), "model.name_or_path: directory './no-base-here/'"),
    ("validate-chat-template-syntax", on_base("validate", "./m", "{% for m in messages %}{{ m }"),
     "data.sft.chat_template: "),
    ("validate-rl-policy-run-missing", rl_validate(), "rl.policy: no run 'no-such-policy'"),
    ("validate-rl-reward-both-and-nan-weight", rl_validate("rl.rewards=[{function: 'a:b', model: ./m, label: x, weight: .nan}]"),
     "rl.rewards.0: set exactly one of function"),
    ("validate-rl-reward-module-missing", rl_validate("rl.rewards=[{function: 'my_rewardz:score'}]"),
     "rl.rewards.0.function: cannot import module 'my_rewardz'"),
    # export to GGUF
    ("gguf-quant-unknown", command("export", "{d}/m", "--format", "gguf", "--quant", "q4_k", "--to", "{d}/o"),
     "--quant 'q4_k': choose one of f16, q8_0"),
    ("gguf-format-unknown", command("export", "{d}/m", "--format", "ggml", "--to", "{d}/o"), "--format 'ggml': choose hf"),
    ("gguf-quant-without-gguf", command("export", "{d}/m", "--quant", "q8_0", "--to", "{d}/o"),
     "--quant q8_0: only with --format gguf"),
    ("gguf-dtype", command("export", "{d}/m", "--format", "gguf", "--dtype", "bf16", "--to", "{d}/o"),
     "--dtype is for --format hf"),
    ("gguf-wordpiece-tokenizer", wordpiece_model, "the tokenizer is a WordPiece model, not BPE"),
    # runs: run, resume, show, status, logs, cancel
    ("run-without-recipe", command("run", "--no-progress"), "give a recipe"),
    ("dry-run-secret-in-sbatch", lambda d: [*run("launch.backend=slurm", "launch.env={API_TOKEN: x}")(d), "--dry-run"],
     "launch.env: API_TOKEN"),
    ("dry-run-deepspeed-json-not-json", lambda d: [*run("train.strategy=deepspeed", f"train.deepspeed_config={write(d / 'ds.json', '{')}")(d),
                                                   "--dry-run"], "ds.json' is not valid JSON"),
    ("launch-dry-run-secret", command("launch", "launch.env={MY_SECRET: x}", "--dry-run", "--", "true"), "launch.env: MY_SECRET"),
    ("logs-follow-nonexistent", command("logs", "nope-1", "--follow"), "no run 'nope-1' under"),
    ("resume-beside-a-recipe", command("run", "x.yaml", "--resume", "x"), "--resume takes only the run id"),
    ("resume-empty-id", command("run", "--resume", "", "--no-progress"), "--resume needs a run id"),
    ("resume-path-as-id", command("run", "--resume", "../x", "--no-progress"), "'../x' is not a run id"),
    ("resume-nonexistent", command("run", "--resume", "nope-1", "--no-progress"), "no run 'nope-1' under"),
    ("resume-completed", with_runs(lambda r: ["run", "--resume", r["done"], "--no-progress"]), "already COMPLETED"),
    ("resume-running", with_runs(lambda r: ["run", "--resume", r["busy"], "--no-progress"]), "is still RUNNING"),
    ("resume-unreadable-run-json", with_runs(lambda r: ["run", "--resume", r["broken"]]), "is not a run record clustertune can read"),
    ("resume-ambiguous-prefix", with_runs(lambda r: ["run", "--resume", "b", "--no-progress"]), "run id 'b' is ambiguous"),
    ("resume-changing-the-recipe", with_runs(lambda r: ["run", "--resume", r["done"], "train.lr=1"]), "--resume takes only the run id"),
    ("show-nonexistent", with_runs(lambda r: ["runs", "show", "nope-1"]), "no run 'nope-1' under"),
    ("show-plot-without-metrics", with_runs(lambda r: ["runs", "show", r["done"], "--plot"]), "has no metrics yet"),
    ("status-nonexistent", command("status", "nope-1"), "no run 'nope-1' under"),
    ("status-unreadable-run-json", with_runs(lambda r: ["status", r["broken"]]), "run.json is not a run record"),
    ("logs-nonexistent", command("logs", "nope-1"), "no run 'nope-1' under"),
    ("logs-of-a-node-it-lacks", with_runs(lambda r: ["logs", r["done"], "--node", "5"]), "it has no node 5"),
    ("cancel-nonexistent", command("cancel", "nope-1"), "no run 'nope-1' under"),
    ("cancel-completed", with_runs(lambda r: ["cancel", r["done"]]), "already COMPLETED; nothing to cancel"),
    ("runs-root-a-file", lambda d: ["runs", "--runs-root", str(write(d / "f", "x"))], "is not a directory"),
    # cache
    ("cache-rm-nothing-named", command("cache", "rm", "--cache-dir", "{d}"), "give fingerprints to remove"),
    ("cache-rm-unknown", command("cache", "rm", "abc123", "--cache-dir", "{d}"), "no prepared data 'abc123'"),
    ("cache-verify-unknown", command("cache", "verify", "abc123", "--cache-dir", "{d}"), "no prepared data 'abc123'"),
    ("cache-rm-not-an-entry", cache_dir_with_stray("cache", "rm", "deadbeef00"), "hold no valid manifest.json"),
    ("cache-ls-root-a-file", lambda d: ["cache", "ls", "--cache-dir", str(write(d / "f", "x"))], "is not a directory"),
    ("cache-verify-root-a-file", lambda d: ["cache", "verify", "--cache-dir", str(write(d / "f", "x"))], "is not a directory"),
    ("prepare-no-workers", lambda d: ["prepare", recipe_file(d, TINY_CAUSAL), "--workers", "0"], "--workers"),
    ("prepare-text-of-numbers", lambda d: ["prepare", *files([{"text": i} for i in range(50)])(d)[1:-1]], "holds numbers"),
    ("prepare-cache-dir-a-file", lambda d: ["prepare", recipe_file(d, TINY_CAUSAL), "--cache-dir", str(write(d / "f", "x"))],
     "set --cache-dir to a directory you can write"),
    ("stage-destination-a-file", lambda d: ["stage", recipe_file(d, TINY_CAUSAL), str(write(d / "f", "x"))],
     "stage destination {d}/f cannot be created"),
    ("estimate-memory-unknown-gpu", lambda d: ["estimate-memory", recipe_file(d, TINY_CAUSAL), "--gpu", "H900"], "--gpu: unknown GPU 'H900'"),
    ("estimate-memory-no-devices", lambda d: ["estimate-memory", recipe_file(d, TINY_CAUSAL), "--devices", "0"], "--devices"),
    ("bench-size-unknown", command("bench", "--size", "huge"), "--size: 'huge' is not one of"),
    ("bench-batch-not-numbers", command("bench", "--batch", "a,b"), "--batch: 'a,b'"),
    ("bench-variant-unknown", command("bench", "--variants", "nope", "--size", "tiny"), "--variants: unknown nope"),
    ("bench-steps-within-skip", command("bench", "--steps", "0", "--size", "tiny", "--variants", "clustertune"), "--steps (0) must be larger"),
    ("bench-no-repeats", command("bench", "--repeats", "0", "--size", "tiny", "--variants", "clustertune"), "--repeats: at least 1"),
    ("fetch-without-store", lambda d: ["fetch", recipe_file(d, TINY_CAUSAL)], "--store"),
    # clusters
    ("host-with-a-space", command("cluster", "add", "c1", "bad host"), "host address 'bad host'"),
    ("host-port-too-big", command("cluster", "add", "c1", "h:99999"), "port 99999 of host h"),
    ("host-port-a-word", command("cluster", "add", "c1", "h:abc"), "port 'abc' is not a number"),
    ("host-port-empty", command("cluster", "add", "c1", "h:"), "port '' is not a number"),
    ("host-user-with-space", command("cluster", "add", "c1", "u ser@h"), "user 'u ser' of host h"),
    ("host-empty-user", command("cluster", "add", "c1", "@h"), "no user before '@'"),
    ("cluster-name-invalid", command("cluster", "add", "bad name!", "h"), "cluster name 'bad name!'"),
    ("port-option-too-big", command("cluster", "add", "c1", "h", "--port", "70000"), "port 70000 of host h"),
    ("jump-host-option", command("cluster", "add", "c1", "h", "--jump", "-x"), "jump host '-x'"),
    ("remote-root-empty", command("cluster", "add", "c1", "h", "--root", ""), "remote root ''"),
    ("key-file-missing", command("cluster", "add", "c1", "h", "--key", "{d}/none"), "--key {d}/none: no such file"),
    ("known-hosts-missing", command("cluster", "add", "c1", "h", "--known-hosts", "{d}/none"), "--known-hosts {d}/none: no such"),
    ("check-unknown-cluster", command("cluster", "check", "nocl"), "no cluster 'nocl'"),
    ("rm-unknown-cluster", command("cluster", "rm", "nocl"), "no cluster 'nocl'"),
    ("exec-unknown-cluster", command("exec", "nocl", "--", "true"), "no cluster 'nocl'"),
    ("sync-unknown-cluster", command("sync", "nocl"), "no cluster 'nocl'"),
    ("clusters-file-malformed", bad_clusters_file, "clusters.yaml: not valid YAML"),
    ("clusters-file-not-utf8", clusters_file(b"\xff\xfe", "cluster", "ls"), "clusters.yaml: not UTF-8 text"),
    ("clusters-file-a-list", clusters_file("- a\n", "cluster", "ls"), "expected a mapping 'clusters:"),
    ("cluster-without-hosts", clusters_file("clusters:\n  x:\n    hosts: []\n", "cluster", "check", "x"),
     "clusters.x.hosts must be a non-empty list"),
    ("cluster-host-unknown-key", clusters_file("clusters:\n  x:\n    hosts:\n      - {address: h, colour: red}\n",
                                               "cluster", "check", "x"), "clusters.x.hosts[0].colour: unknown key"),
    ("cluster-host-port-a-word", clusters_file("clusters:\n  x:\n    hosts:\n      - {address: h, port: ssh}\n",
                                               "cluster", "check", "x"), "clusters.x.hosts[0].port: Input should be a valid integer"),
    ("cluster-host-port-out-of-range", clusters_file("clusters:\n  x:\n    hosts:\n      - {address: h, port: 0}\n",
                                                     "cluster", "ls"), "clusters.x: port 0 of host h is not a TCP port"),
    ("cluster-host-not-a-mapping", clusters_file("clusters:\n  x:\n    hosts: [h1]\n", "cluster", "check", "x"),
     "clusters.x.hosts[0] must be a mapping with an 'address'"),
    ("down-unknown-cluster", command("cluster", "down", "nocl"), "no cluster 'nocl'"),
    ("gc-unknown-cluster", command("cluster", "gc", "nocl"), "no cluster 'nocl'"),
    ("up-gpus-count-a-word", command("cluster", "up", "c9", "--gpus", "A10G:x"), "--gpus 'A10G:x' is not NAME[:COUNT]"),
    ("up-autostop-a-word", command("cluster", "up", "c9", "--gpus", "A10G:1", "--autostop", "soon"), "--autostop 'soon'"),
    ("up-no-nodes", command("cluster", "up", "c9", "--gpus", "A10G:1", "--nodes", "0"), "--nodes 0"),
    ("exec-host-out-of-range", on_a_cluster("exec", "lc", "--host", "7", "--", "true"), "cluster 'lc' has no host 7"),
    ("exec-host-unknown", on_a_cluster("exec", "lc", "--host", "10.9.9.9", "--", "true"), "has no host '10.9.9.9'"),
    ("exec-negative-gpus", on_a_cluster("exec", "lc", "--gpus", "-1", "--", "true"), "gpus=-1"),
    ("exec-workdir-missing", on_a_cluster("exec", "lc", "--workdir", "{d}/none", "--", "true"), "--workdir {d}/none: not a folder"),
    ("exec-without-command", on_a_cluster("exec", "lc"), "Missing argument 'command'"),
    ("sync-folder-missing", on_a_cluster("sync", "lc", "{d}/none"), "none: not a folder"),
    # launch (a user's own command)
    ("launch-no-command", command("launch", "launch.procs_per_node=1"), "give the command to run after `--`"),
    ("launch-empty-command", command("launch", "--"), "give the command to run after `--`"),
    ("launch-stage-missing-path", command("launch", "launch.stage=[no-such-dir]", "--", "true"),
     "launch.stage: 'no-such-dir' does not exist here"),
    ("launch-srun-runner-locally", command("launch", "launch.runner=srun", "--", "true"),
     "launch.runner: srun starts the ranks as SLURM tasks; with launch.backend=local use launch.runner=torchrun"),
    ("launch-recipe-key", command("launch", "train.lr=1", "--", "true"), "only launch.* keys apply"),
    ("launch-unknown-key", command("launch", "launch.nodez=1", "--", "true"), "did you mean 'launch.nodes'?"),
    ("launch-source-missing", command("launch", "{d}/nope.yaml", "--", "true"), "nope.yaml: no such file"),
    ("launch-resume-with-command", command("launch", "--resume", "x", "--", "true"), "--resume runs the run's own command"),
    ("launch-resume-dry-run", command("launch", "--resume", "x", "--dry-run"), "drop --resume"),
    ("launch-resume-nonexistent", command("launch", "--resume", "nope-1"), "no run 'nope-1' under"),
    ("launch-resume-completed", with_script_runs(lambda r: ["launch", "--resume", r["COMPLETED"]]), "already COMPLETED"),
    ("launch-resume-running", with_script_runs(lambda r: ["launch", "--resume", r["RUNNING"]]), "is still RUNNING"),
    ("launch-resume-recipe-key", with_script_runs(lambda r: ["launch", "--resume", r["COMPLETED"], "train.lr=1"]),
     "only launch.* keys may change"),
    ("launch-files-missing", command("launch", "launch.files=[./nope.sh]", "--", "true"),
     "launch.files.0: './nope.sh' does not exist"),
    ("run-launch-files-missing", run("launch.files=[./nope.sh]"), "launch.files.0: './nope.sh' does not exist"),
    ("run-node-visible-relative", run("launch.node_visible=[shared]"), "give absolute path prefixes"),
    ("run-deepspeed-json-missing", run("train.strategy=deepspeed", "train.deepspeed_config=./ds.json"),
     "train.deepspeed_config: file './ds.json' does not exist"),
    ("flag-for-a-recipe-key", run("--max-steps", "10"), "hint: recipe keys go after the recipe as key=value: "
                                                          "train.max_steps=10"),
    ("trainer-flag", run("--learning_rate=3e-4"), "recipe keys go after the recipe as key=value: train.lr=3e-4"),
    ("axolotl-sequence-len", run("sequence_len=128"), "did you mean 'data.max_length'? (sequence_len in Axolotl terms"),
    ("axolotl-num-epochs", run("num_epochs=3"), "did you mean 'train.epochs'? (num_epochs in Axolotl terms)"),
    ("axolotl-lora-r", run("lora_r=8"), "did you mean 'model.adapter.rank'? (lora_r in Axolotl terms)"),
    ("peft-r", run("model.adapter.r=8"), "model.adapter.r: unknown key (did you mean 'model.adapter.rank'? (r in PEFT terms)"),
    ("llamafactory-cutoff-len", run("cutoff_len=512"), "(cutoff_len in LLaMA-Factory terms)"),
    ("chat-template-typo", command("validate", "sft-demo", "data.sft.chat_template=chatm"), "did you mean 'chatml'?"),
    ("serve-as-a-local-run", command("serve", "{d}", "launch.backend=local"),
     "serving as a run takes launch.backend=slurm"),
    ("serve-with-launch-files", command("serve", "{d}", "launch.backend=ssh", "launch.files=[x]"),
     "launch.files: a server is one process per run"),
    ("serve-nothing", command("serve"), "name the model to serve (a run id or a model directory), or give --tinker"),
    ("serve-tinker-with-a-model-as-a-run", command("serve", "{d}", "--tinker", "launch.backend=slurm"),
     "--tinker with launch keys serves the Tinker API alone: leave the model out"),
]


@pytest.mark.parametrize(("setup", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_naming_it_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], setup: Setup, says: str) -> None:
    work = tmp_path / "case"
    work.mkdir()
    monkeypatch.chdir(work)  # relative paths in the cases resolve here
    monkeypatch.setenv("CLUSTERTUNE_RUNS", str(work / "runs"))
    monkeypatch.setenv("CLUSTERTUNE_CONFIG_DIR", str(work / "cfg"))
    monkeypatch.delenv("CT_TEST_UNSET_VAR", raising=False)
    argv = setup(work)
    before = tree_snapshot(work)
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert says.replace("{d}", str(work)) in err and "Traceback" not in err, err
    assert tree_snapshot(work) == before  # no run directory, no saved config, no file changed


def test_a_tracker_that_is_not_installed_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if it were not installed: its import fails
    rc = main(["run", recipe_file(tmp_path, TINY_CAUSAL), "tracking.trackers=[wandb]", "--no-progress",
               "--runs-root", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and f"tracking.trackers: wandb asked for but not installed; `{install_hint('wandb')}`" in err, err
    assert not (tmp_path / "runs").exists()


def test_a_checkpoint_that_does_not_fit_the_model_fails_the_resume_and_stays(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from clustertune.runs.run import Run
    from clustertune.runs.state import RunState

    root = tmp_path / "runs"
    recipe = with_(TINY_CAUSAL, train={"max_steps": 3, "save_every": 2, "eval_at_start": False},
                   data={"max_eval_samples": 4})
    assert main(["run", recipe_file(tmp_path, recipe), "--no-progress", "--runs-root", str(root)]) == 0
    (run_dir,) = root.iterdir()
    (ckpt,) = (run_dir / "checkpoints").iterdir()
    # The run stopped part-way, and its recipe now asks for a wider model than the checkpoint holds.
    info = json.loads((run_dir / "run.json").read_text())
    info["state"] = info["attempts"][-1]["state"] = RunState.FAILED.value
    (run_dir / "run.json").write_text(json.dumps(info))
    wider = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    wider["model"]["config_overrides"]["n_embd"] = 128
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(wider))
    weights = tree_snapshot(ckpt)
    capsys.readouterr()
    rc = main(["run", "--resume", run_dir.name, "--no-progress", "--runs-root", str(root)])
    err = capsys.readouterr().err
    assert rc == 2 and f"checkpoint {ckpt} does not fit this model/optimizer" in err and "Traceback" not in err, err
    assert Run.load(run_dir).state is RunState.FAILED and tree_snapshot(ckpt) == weights


def test_an_unusable_runs_root_is_named_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    rc = main(["run", recipe_file(tmp_path, TINY_CAUSAL), "--no-progress", "--runs-root", str(blocker / "runs")])
    err = capsys.readouterr().err
    assert rc == 2 and f"runs root {blocker / 'runs'}" in err and "--runs-root" in err, err


def test_a_whole_section_as_an_override_keeps_the_keys_it_does_not_name(tmp_path: Path) -> None:
    from clustertune.recipe.load import load_recipe

    r = load_recipe(recipe_file(tmp_path, TINY_CAUSAL), ["train={lr: 1}"])
    assert r.train.lr == 1 and r.train.max_steps == TINY_CAUSAL["train"]["max_steps"]


@pytest.mark.parametrize(("argv", "says"), [
    (["run", "{d}/bin.yaml"], "is not a UTF-8 text file"),
    (["status", "nope-1", "--runs-root", "{d}"], "no run 'nope-1' under"),
], ids=["recipe-not-utf8", "status-nonexistent"])
def test_the_console_entry_point_exits_2_without_a_traceback(tmp_path: Path, argv: list[str], says: str) -> None:
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00\x01name: x\n")
    out = cli(*[a.replace("{d}", str(tmp_path)) for a in argv], cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr
