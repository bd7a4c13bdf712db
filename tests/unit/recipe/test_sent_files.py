"""What ``launch.files`` sends to the nodes is checked once, by one checker, for `clustertune
validate` (a recipe's launch section) and `clustertune launch` (a command's) alike: a folder
holding a link loop, a link out of it, a FIFO, socket or device, an unreadable file, or two
entries of one name are refused up front, naming the path and the fix, with nothing written."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from clustertune import api
from clustertune.cli.main import main
from clustertune.errors import LaunchError, RecipeError
from clustertune.recipe import sent_files
from tests.helpers import TINY_CAUSAL, with_

COMMAND = ["python", "train.py"]


def refusals(tmp_path: Path, entries: list[str]) -> tuple[str, str]:
    """What validate says of a recipe with these launch.files, and what a launch of a command
    with the same launch.files says (the decision a launch starts from: nothing is written)."""
    with pytest.raises(RecipeError) as validated:
        api.validate(with_(TINY_CAUSAL, launch={"files": entries}))
    with pytest.raises(LaunchError) as launched:
        api.decide_command(COMMAND, None, [f"launch.files={json.dumps(entries)}"], runs_root_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    assert said(str(validated.value)) == said(str(launched.value))  # word for word: one checker
    return str(validated.value), str(launched.value)


def said(text: str) -> list[str]:
    """The launch.files problems of a message, without how each command frames them."""
    return sorted(line.split("launch.files.", 1)[1] for line in text.splitlines() if "launch.files." in line)


def folder(tmp_path: Path, name: str = "tree") -> Path:
    d = tmp_path / name
    (d / "sub").mkdir(parents=True)
    (d / "setup.sh").write_text("export X=1\n")
    (d / "sub" / "vocab.txt").write_text("a\nb\n")
    return d


def test_a_symlink_loop_inside_a_listed_folder_is_refused_by_validate_and_launch_alike(tmp_path: Path) -> None:
    d = folder(tmp_path)
    os.symlink("..", d / "sub" / "up")  # sub/up/sub/up/... never ends
    os.symlink("self", d / "self")  # a link to itself: ELOOP
    validated, launched = refusals(tmp_path, [str(d)])
    for text in (validated, launched):
        assert f"launch.files.0: '{d}/self' is a symbolic link loop" in text, text
        assert f"launch.files.0: '{d}/sub/up' is a symbolic link loop (it leads back to {d}, a folder that holds it)" \
            in text, text
        assert "remove the link" in text


def test_a_link_out_of_the_listed_folder_is_refused_with_how_to_bring_the_target_in(tmp_path: Path) -> None:
    d = folder(tmp_path)
    outside = tmp_path / "secrets.txt"
    outside.write_text("not for the cluster\n")
    os.symlink(outside, d / "linked.txt")
    os.symlink(tmp_path / "gone.txt", d / "dangling.txt")
    os.symlink("sub/vocab.txt", d / "inside.txt")  # a link inside the folder is fine
    validated, launched = refusals(tmp_path, [str(d)])
    for text in (validated, launched):
        assert (f"'{d}/linked.txt' is a symbolic link to {outside}, outside the listed folder {str(d)!r}" in text), text
        assert "copy the target into the folder (cp -L)" in text and "its own launch.files entry" in text
        assert f"'{d}/dangling.txt' is a symbolic link to {str(tmp_path / 'gone.txt')!r}, which does not exist" in text
        assert "inside.txt" not in text


def test_fifos_sockets_and_devices_are_refused_naming_the_path(tmp_path: Path) -> None:
    d = folder(tmp_path)
    os.mkfifo(d / "sub" / "pipe")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(d / "agent.sock"))
        validated, launched = refusals(tmp_path, [str(d), "/dev/null"])
    for text in (validated, launched):
        assert f"launch.files.0: '{d}/sub/pipe' is a FIFO (named pipe)" in text, text
        assert f"launch.files.0: '{d}/agent.sock' is a socket" in text, text
        assert "launch.files.1: '/dev/null' is a character device" in text, text
        assert "only regular files and folders are sent" in text


def test_an_unreadable_file_in_a_listed_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = folder(tmp_path)
    locked = d / "sub" / "locked.txt"
    locked.write_text("x")
    locked.chmod(0)
    if os.geteuid() == 0:  # root reads anything: answer as the filesystem answers everyone else
        real = sent_files._readable
        monkeypatch.setattr(sent_files, "_readable", lambda p, is_dir: p != locked and real(p, is_dir))
    try:
        validated, launched = refusals(tmp_path, [str(d)])
    finally:
        locked.chmod(0o644)
    for text in (validated, launched):
        assert f"launch.files.0: '{d}/sub/locked.txt' cannot be read (permission denied)" in text, text
        assert "chmod u+r" in text


def test_two_entries_of_one_name_are_refused_by_launch_as_by_validate(tmp_path: Path) -> None:
    a, b = folder(tmp_path, "a"), folder(tmp_path, "b")
    validated, launched = refusals(tmp_path, [str(a / "setup.sh"), str(b / "setup.sh")])
    says = (f"launch.files.1: '{b / 'setup.sh'}' has the same name ('setup.sh') as launch.files.0; both would land "
            "at files/setup.sh on the nodes: rename one")
    assert says in validated and says in launched, (validated, launched)


def test_a_clean_folder_with_inner_links_and_skipped_git_internals_passes_both(tmp_path: Path) -> None:
    d = folder(tmp_path)
    os.symlink("sub", d / "also-sub")
    (d / ".git").mkdir()
    os.symlink("..", d / ".git" / "loop")  # .git is never sent, so never walked
    api.validate(with_(TINY_CAUSAL, launch={"files": [str(d)]}))
    decided = api.decide_command(COMMAND, None, [f"launch.files={json.dumps([str(d)])}"],
                                 runs_root_dir=tmp_path / "runs")
    assert decided.recipe.launch.files == [str(d)]


def test_clustertune_launch_with_a_looping_folder_exits_2_and_makes_no_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    d = folder(tmp_path)
    os.symlink(".", d / "sub" / "here")
    monkeypatch.chdir(tmp_path)
    rc = main(["launch", "launch.files=[./tree]", "--runs-root", str(tmp_path / "runs"), "--", "true"])
    err = capsys.readouterr().err
    assert rc == 2 and "launch.files.0: './tree/sub/here' is a symbolic link loop" in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()
