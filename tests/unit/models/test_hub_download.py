"""A first download from the Hugging Face Hub is reported as it goes: the start line says how
many files and MB, then a byte count every few seconds. The hub here is a local HTTP server
that answers what huggingface_hub asks (the model info API, HEAD and GET on resolve URLs) for
one tiny GPT-2 made on the spot, its GETs slowed so that the download takes a moment."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from safetensors.torch import load as load_safetensors

from clustertune.models import build_model, load_tokenizer, resolve_config, train_bpe
from clustertune.recipe import load_recipe

REPO = "acme/tiny-gpt2"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
TEXTS = ["def f(x):\n    return x + 1", "The quick brown fox jumps over the lazy dog."] * 50
CHUNK, PAUSE = 16_384, 0.01  # the weights (~1.8 MB) arrive in about a second and a half


@dataclass
class FakeHub:
    """The files of one repo, served as the Hub serves them; what was asked is kept."""

    files: dict[str, bytes]
    sizes_fail: bool = False
    asked: list[str] = field(default_factory=list)
    url: str = ""

    @staticmethod
    def is_lfs(name: str) -> bool:
        return name.endswith(".safetensors")

    def etag(self, name: str) -> str:
        data = self.files[name]
        if self.is_lfs(name):
            return hashlib.sha256(data).hexdigest()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id

    def sibling(self, name: str) -> dict[str, Any]:
        data = self.files[name]
        lfs = {"size": len(data), "sha256": self.etag(name), "pointerSize": 134} if self.is_lfs(name) else None
        git_id = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        return {"rfilename": name, "size": len(data), "blobId": git_id, **({"lfs": lfs} if lfs else {})}


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet: the test reads `hub.asked` instead
            pass

        def do_HEAD(self) -> None:
            self.answer(body=False)

        def do_GET(self) -> None:
            self.answer(body=True)

        def answer(self, body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.asked.append(f"{self.command} {self.path} {self.headers.get('Authorization')}")
            info = re.fullmatch(rf"/api/models/{REPO}(?:/revision/(?P<rev>[^/]+))?", path)
            if info:
                if hub.sizes_fail and "blobs=" in self.path:  # a mirror that does not serve files' metadata
                    return self.send(501, b'{"error": "not implemented"}', body, {"Content-Type": "application/json"})
                doc = {"id": REPO, "modelId": REPO, "sha": COMMIT, "private": False,
                       "siblings": [hub.sibling(n) for n in sorted(hub.files)]}
                return self.send(200, json.dumps(doc).encode(), body, {"Content-Type": "application/json"})
            if path.startswith(f"/api/models/{REPO}/tree/"):  # transformers looks for chat templates: none
                return self.send(404, b'{"error": "Entry not found"}', body, {"X-Error-Code": "EntryNotFound"})
            got = re.fullmatch(rf"/{REPO}/resolve/(?P<rev>[^/]+)/(?P<name>.+)", path)
            if not got:
                return self.send(404, b"not found", body, {"X-Error-Code": "RepoNotFound"})
            name = got["name"]
            if name not in hub.files:
                return self.send(404, b"Entry not found", body, {"X-Error-Code": "EntryNotFound",
                                                                 "X-Repo-Commit": COMMIT})
            data = hub.files[name]
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{hub.etag(name)}"', "Accept-Ranges": "bytes",
                       "Content-Type": "application/octet-stream"}
            if hub.is_lfs(name):
                headers |= {"X-Linked-Etag": f'"{hub.etag(name)}"', "X-Linked-Size": str(len(data))}
            self.send(200, data, body, headers, slow=hub.is_lfs(name))

        def send(self, code: int, data: bytes, body: bool, headers: dict[str, str], slow: bool = False) -> None:
            self.send_response(code)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not body:
                return
            for i in range(0, len(data), CHUNK):
                self.wfile.write(data[i:i + CHUNK])
                self.wfile.flush()
                if slow:
                    time.sleep(PAUSE)

    return Handler


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A tiny GPT-2 (config, ~1.8 MB of safetensors, tokenizer files) on a local "Hub", with
    huggingface_hub pointed at it, online, and a fresh cache."""
    from huggingface_hub import constants
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import hub as transformers_hub

    tok = train_bpe(TEXTS, 300, classification=False, model_max_length=64)
    repo = tmp_path / "repo"
    tok.save_pretrained(str(repo))
    config = GPT2Config(vocab_size=len(tok), n_layer=2, n_embd=128, n_head=2, n_positions=64,
                        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    GPT2LMHeadModel(config).save_pretrained(str(repo))
    files = {p.name: p.read_bytes() for p in repo.iterdir() if p.is_file()}
    fake = FakeHub(files)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    # huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE once, at import: set its constants.
    monkeypatch.setenv("HF_ENDPOINT", fake.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", fake.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", fake.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
    # http_get writes what arrives in chunks of 10 MB; in ~16 KB ones the count moves here too.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", CHUNK)
    monkeypatch.setattr(transformers_hub, "_hf_api", None)  # transformers keeps one HfApi, made for one endpoint
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def _recipe(**model: Any) -> Any:
    return load_recipe({"name": "tiny-hub", "task": "causal_lm",
                        "model": {"name_or_path": REPO, "tokenizer": REPO, **model},
                        "data": {"dataset": "builtin:pydoc", "block_size": 64},
                        "train": {"precision": "fp32", "batch_size": 2, "max_steps": 1, "cpu_threads": 1}})


def _load(caplog: pytest.LogCaptureFixture, **model: Any) -> tuple[Any, list[str]]:
    """The model as a run builds it (huggingface_hub's bars off, as train/execute.py has them),
    and the lines the user saw."""
    from transformers.utils import logging as hf_logging

    recipe = _recipe(**model)
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with caplog.at_level(logging.INFO, logger="clustertune"):
            tok = load_tokenizer(REPO)
            model = build_model(recipe, resolve_config(recipe, tok), tok)
    finally:
        if was_on:
            hf_logging.enable_progress_bar()
    return model, [r.getMessage() for r in caplog.records if r.getMessage().startswith("model:")]


def test_a_first_download_says_its_size_then_counts_the_bytes(
        hub: FakeHub, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.models import download

    monkeypatch.setattr(download, "REPORT_EVERY", 0.2)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")  # a gated model's: the size query sends it too
    size = len(hub.files["model.safetensors"])
    total = f"{size / 1e6:,.1f}"
    model, lines = _load(caplog, revision="main")
    assert lines[0] == (f"model: downloading the weights of {REPO} from the Hugging Face Hub into its cache "
                        f"(1 file, {total} MB; first use here; later runs load them from there)")
    counts = [m for m in (re.fullmatch(rf"model: downloaded ([\d.,]+) of {re.escape(total)} MB of {REPO} "
                                       r"\([\d.,]+ MB/s(?:, about \d+ (?:s|min) left)?\)", line) for line in lines[1:]) if m]
    assert counts, lines
    assert all(0 < float(m[1]) <= float(total) for m in counts)
    assert float(counts[0][1]) < float(total), "no line while the bytes were still arriving"
    assert lines[-1] == f"model: downloaded {total} MB of {REPO} into the Hugging Face cache"
    # The sizes were asked once, of the recipe's revision, with the token.
    assert [r for r in hub.asked if "blobs=" in r] == [f"GET /api/models/{REPO}/revision/main?blobs=true Bearer hf_secret"]
    # The model loaded the weights it was sent: a tensor equals the one in the served file.
    served = load_safetensors(hub.files["model.safetensors"])
    assert (model.transformer.wpe.weight.detach() == served["transformer.wpe.weight"]).all()


def test_when_the_hub_does_not_say_the_sizes_the_download_has_todays_line(
        hub: FakeHub, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from clustertune.models import download

    monkeypatch.setattr(download, "REPORT_EVERY", 0.2)
    hub.sizes_fail = True  # as when the query times out, or the hub is a mirror that does not say
    model, lines = _load(caplog)
    assert lines == [f"model: downloading the weights of {REPO} from the Hugging Face Hub into its cache "
                     "(first use here; later runs load them from there)"]
    assert model.transformer.wpe.weight.shape == (64, 128)


def test_the_files_counted_are_those_from_pretrained_reads_and_only_new_bytes_count(tmp_path: Path) -> None:
    from huggingface_hub.hf_api import BlobLfsInfo, RepoSibling

    from clustertune.models.download import Download, HubFile, weight_files

    def lfs(name: str, size: int) -> RepoSibling:
        return RepoSibling(name, size, "b" * 40, BlobLfsInfo(size=size, sha256=name[:8].ljust(64, "0"), pointer_size=134))

    sharded = [RepoSibling("config.json", 600, "c" * 40), RepoSibling("model.safetensors.index.json", 900, "d" * 40),
               lfs("model-00001-of-00002.safetensors", 5_000), lfs("model-00002-of-00002.safetensors", 3_000),
               lfs("consolidated.safetensors", 8_000), lfs("pytorch_model.bin", 8_100)]
    assert [f.name for f in weight_files(sharded)] == ["model.safetensors.index.json", "model-00001-of-00002.safetensors",
                                                       "model-00002-of-00002.safetensors"]
    assert [f.name for f in weight_files(sharded[-1:])] == ["pytorch_model.bin"]
    assert weight_files([RepoSibling("model.safetensors")]) == []  # no sizes: no count (today's line)

    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "e1.0badc0de.incomplete").write_bytes(b"x" * 700)  # left by a process that was killed
    d = Download("acme/x", (HubFile("a", "e1", 1_000), HubFile("b", "e2", 2_000)), blobs)
    assert d.summary() == "2 files, 0.0 MB" and d.total == 3_000
    stale = d.partials()
    assert d.arrived(stale) == 0
    (blobs / "e1.1234abcd.incomplete").write_bytes(b"x" * 400)
    assert d.arrived(stale) == 400
    (blobs / "e2").write_bytes(b"x" * 2_000)
    assert d.arrived(stale) == 2_400
