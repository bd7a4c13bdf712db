"""launch.stage on one node: copied once by the first process, checked against the source,
reused while the source is unchanged, waited for by the others; a bad copy is never used."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from clustertune.script import stage as st


def tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.bin").write_bytes(os.urandom(200_000))
    return root


def test_names_of_the_variables() -> None:
    assert st.env_name("/data/my-set") == "CLUSTERTUNE_STAGED_MY_SET"
    assert st.env_name("hf cache/") == "CLUSTERTUNE_STAGED_HF_CACHE"
    assert st.env_name("train.jsonl") == "CLUSTERTUNE_STAGED_TRAIN_JSONL"


def test_first_process_copies_and_checks_the_others_wait_and_a_second_attempt_reuses(tmp_path: Path) -> None:
    src, single = tree(tmp_path / "my-set"), tmp_path / "one.jsonl"
    single.write_text('{"text": "x"}\n')
    env = {"SLURM_TMPDIR": str(tmp_path / "node1"), "CLUSTERTUNE_RUN_ID": "r1"}
    said: list[str] = []
    got: dict[str, dict[str, str]] = {}
    # A waiting process started first: it sees nothing until the first one's checked copy is whole.
    waiter = threading.Thread(target=lambda: got.setdefault("w", st.stage([str(src), str(single)], env, first=False,
                                                                          timeout=30, say=said.append)))
    waiter.start()
    got["f"] = st.stage([str(src), str(single)], env, first=True, say=said.append)
    waiter.join(30)
    copy = Path(got["f"]["CLUSTERTUNE_STAGED_MY_SET"])
    assert got["w"] == got["f"] and copy == tmp_path / "node1" / "clustertune-stage" / "r1" / "my-set"
    assert (copy / "sub" / "b.bin").read_bytes() == (src / "sub" / "b.bin").read_bytes()
    assert Path(got["f"]["CLUSTERTUNE_STAGED_ONE_JSONL"]).read_text() == single.read_text()
    staged = [s for s in said if "staged" in s]
    assert len(staged) == 2 and all(" in " in s for s in staged)
    # Each copy said what it copies before it began: the folder's two files, the single file's one.
    assert f"clustertune: staging {src} -> {copy} (2 files, 0.2 MB)" in said
    assert any(s.startswith(f"clustertune: staging {single} -> ") and "(1 files, 0.0 MB)" in s for s in said)
    # Another attempt: the whole copy is reused; a changed source is copied again.
    said.clear()
    st.stage([str(src)], env, first=True, say=said.append)
    assert said == [f"clustertune: staged {src} -> {copy} (the copy already there)"]
    (src / "a.txt").write_text("beta")
    said.clear()
    st.stage([str(src)], env, first=True, say=said.append)
    assert (copy / "a.txt").read_text() == "beta" and "already there" not in said[0]


def test_a_long_copy_says_how_far_it_is(tmp_path: Path) -> None:
    src = tmp_path / "big"
    src.mkdir()
    for i in range(3):
        (src / f"part-{i}.bin").write_bytes(os.urandom(1_000_000))
    said: list[str] = []
    # every=0: each file copied is a moment to report at, as ten seconds are for a real copy.
    st.stage([str(src)], {"TMPDIR": str(tmp_path / "n"), "CLUSTERTUNE_RUN_ID": "r"}, first=True,
             say=said.append, every=0)
    progress = [s for s in said if " copied (" in s]
    assert progress == [f"clustertune: staging {src}: {n}.0 MB of 3.0 MB copied ({3 - n} files to go)"
                        for n in (1, 2, 3)]
    assert said[0].endswith("(3 files, 3.0 MB)") and said.index(progress[0]) > 0 and "staged" in said[-1]


def test_a_copy_that_differs_from_its_source_is_refused_and_removed(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    src = tree(tmp_path / "set")
    real_copytree = st.shutil.copytree

    def corrupting(a: Path, b: Path, *args: object, **kw: object) -> object:
        out = real_copytree(a, b, *args, **kw)
        if Path(a) == src:  # the top of the tree (copytree recurses through itself)
            (Path(b) / "sub" / "b.bin").write_bytes(b"torn")  # a copy cut short
        return out

    monkeypatch.setattr(st.shutil, "copytree", corrupting)
    env = {"TMPDIR": str(tmp_path / "local"), "CLUSTERTUNE_RUN_ID": "r"}
    with pytest.raises(st.StageError, match=r"differs from the source in sub/b.bin"):
        st.stage([str(src)], env, first=True, say=lambda s: None)
    root = tmp_path / "local" / "clustertune-stage" / "r"
    assert sorted(p.name for p in root.iterdir()) == []  # no copy, no manifest: nothing to take for whole
    with pytest.raises(st.StageError, match="no copy of .* within 0.5s"):
        st.stage([str(src)], env, first=False, timeout=0.5)
    with pytest.raises(st.StageError, match="does not exist"):
        st.stage([str(tmp_path / "nope")], env, first=True)
