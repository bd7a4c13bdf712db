"""`export --push`: through huggingface_hub to the tests' hub-shaped HTTP server on 127.0.0.1;
the files arrive intact and download back, the token travels only in request headers, and
what a user can get wrong (offline mode, no token, a refused token, no server) is a typed error."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clustertune.errors import ModelError
from clustertune.runs.run import Run
from clustertune.use.push import push_dir
from tests.helpers import cli, tree_snapshot
from tests.hubserver import FakeHub

TOKEN = "hf_testtoken_5f1e2d3c4b5a69788796a5b4c3d2e1f0"


def _every_byte(root: Path) -> bytes:
    return b"".join(tree_snapshot(root).values())


def test_export_push_uploads_the_directory_intact_and_it_downloads_back(sft_base: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    runs = tmp_path / "runs"
    run = Run.create(runs, "tiny", "causal_lm", yaml.safe_dump({"name": "tiny"}), ["clustertune", "run"])
    shutil.copytree(sft_base, run.paths.model)
    (tmp_path / "hub").mkdir()
    with FakeHub(tmp_path / "hub", write_token=TOKEN) as hub:
        env = {"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0", "HF_TOKEN": TOKEN, "HF_HOME": str(tmp_path / "hf"),
               "CLUSTERTUNE_RUNS": str(runs), "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        res = cli("export", run.id, "--to", str(tmp_path / "out"), "--push", "testorg/tiny-export", env=env)
        assert res.returncode == 0, res.stderr
        assert f"pushed    {hub.url}/testorg/tiny-export (commit " in res.stdout
        exported = tree_snapshot(tmp_path / "out")
        assert "model.safetensors" in exported and "README.md" in exported
        assert tree_snapshot(hub.repo_dir("models", "testorg/tiny-export")) == exported  # byte for byte
        assert hub.commits[-1]["files"] == sorted(exported)
        assert "testorg/tiny-export" in (tmp_path / "out" / "README.md").read_text()  # the card loads from the repo

        # The token went only into request headers: not to the terminal, the export or the run.
        assert set(hub.tokens) == {TOKEN}
        for where in (res.stdout, res.stderr):
            assert TOKEN not in where
        for root in (tmp_path / "out", run.paths.root):
            assert TOKEN.encode() not in _every_byte(root)

        # Downloaded back through the same server, as anyone would.
        code = ("import sys; from huggingface_hub import snapshot_download; "
                "print(snapshot_download('testorg/tiny-export', cache_dir=sys.argv[1]))")
        got = subprocess.run([sys.executable, "-c", code, str(tmp_path / "dl")], env={**os.environ, **env},
                             capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr
        assert tree_snapshot(Path(got.stdout.strip().splitlines()[-1])) == exported

        # Pushing again into the existing repository (exist_ok), in this process (its
        # huggingface_hub read HF_HUB_OFFLINE=1 at import: switched off for these calls).
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        (tmp_path / "again").mkdir()
        (tmp_path / "again" / "notes.txt").write_text("second commit\n")
        pushed = push_dir(tmp_path / "again", "testorg/tiny-export", token=TOKEN, endpoint=hub.url)
        assert pushed.commit == hub.commit("models", "testorg/tiny-export")
        assert (hub.repo_dir("models", "testorg/tiny-export") / "notes.txt").read_text() == "second commit\n"
        assert hub.commits[-1]["files"] == ["notes.txt"]
        assert hub.created["testorg/tiny-export"].get("visibility") is None
        push_dir(tmp_path / "again", "testorg/private-one", token=TOKEN, endpoint=hub.url, private=True)
        assert hub.created["testorg/private-one"]["visibility"] == "private"

        with pytest.raises(ModelError, match="refused the token.*HTTP 401") as refused:
            push_dir(tmp_path / "again", "testorg/other", token="hf_wrong_token_value", endpoint=hub.url)
        assert "hf_wrong_token_value" not in str(refused.value)
        with pytest.raises(ModelError, match="not a repository id"):
            push_dir(tmp_path / "again", "no/such/repo name", token=TOKEN, endpoint=hub.url)

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(ModelError, match=f"cannot reach {closed}") as unreachable:
        push_dir(tmp_path / "again", "testorg/x", token=TOKEN, endpoint=closed)
    assert TOKEN not in str(unreachable.value)


def test_push_offline_or_without_a_token_is_a_typed_error_before_any_request(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelError, match="HF_HUB_OFFLINE=1 is set.*unset it"):
        push_dir(tmp_path, "testorg/x", token=TOKEN, endpoint="http://127.0.0.1:9")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token-file"))
    with pytest.raises(ModelError, match="no Hugging Face token; set HF_TOKEN"):
        push_dir(tmp_path, "testorg/x", endpoint="http://127.0.0.1:9")
