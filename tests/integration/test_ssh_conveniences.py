"""What Runhouse users reach for: ``ct.Env`` and ``ct.get_ref`` at the top of the package, and
a finished ``.remote()`` call listed as finished without anyone asking for its status."""

from __future__ import annotations

import json
import time
from pathlib import Path

import clustertune as ct
from clustertune.remote.envs import Env
from clustertune.calls.functions import Ref
from clustertune.runs.state import RunState
from tests.helpers import cli


def _triple(x):
    return 3 * x


def test_listing_refreshes_a_finished_remote_call_and_the_names_are_exported(ssh_cluster) -> None:
    assert ct.Env is Env and "Env" in ct.__all__ and "get_ref" in ct.__all__
    ref = ct.function(_triple).to(ct.cluster("loop"), env=ct.Env()).remote(4)
    # Wait on the host's own record (never asking the client's status, which would refresh it).
    state = Path(ssh_cluster.hosts[0].root) / "runs" / ref.run_key / "state.json"
    deadline = time.time() + 60
    while not (state.is_file() and json.loads(state.read_text()).get("state") == "COMPLETED"):
        assert time.time() < deadline, "the call did not finish on the host"
        time.sleep(0.2)
    assert not ct.get_run(ref.run_key).state.terminal  # the client has not looked yet
    listed = cli("runs")
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ref.run_key in ln)
    assert "COMPLETED" in line
    assert ct.get_run(ref.run_key).state is RunState.COMPLETED
    again = ct.get_ref(ref.run_key)
    assert isinstance(again, Ref) and again.result() == 12


def _fake_wheel(index: Path, version: str) -> None:
    """A pure-Python wheel named torch, in a file:// simple index of its own (installs offline in
    a second; the real CPU build is on this machine's pip configuration, which pip is told to skip)."""
    import zipfile

    pkg = index / "torch"
    pkg.mkdir(parents=True)
    name = f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(pkg / name, "w") as z:
        z.writestr("torch/__init__.py", f"__version__ = {version!r}\n")
        info = f"torch-{version}.dist-info"
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", f"torch/__init__.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    (pkg / "index.html").write_text(f'<a href="{name}">{name}</a>\n')
    (index / "index.html").write_text('<a href="torch/">torch</a>\n')


def test_a_host_without_gpus_gets_torch_from_the_cpu_index_and_exec_reuses_host_packages(ssh_cluster, tmp_path) -> None:
    import sys

    _fake_wheel(tmp_path / "main", "9.9.0")
    _fake_wheel(tmp_path / "cpu", "9.9.0+cpu")
    env = Env(requirements=("torch==9.9.0",), index_url=f"file://{tmp_path / 'main'}",
              torch_cpu_index=f"file://{tmp_path / 'cpu'}", pip_env={"PIP_CONFIG_FILE": "/dev/null"})
    c = ct.cluster("loop")
    h = c.ensure_env(0, env, stream=False)
    installed = sorted(p.name for p in (Path(ssh_cluster.hosts[0].root) / "envs" / h).rglob("torch-*.dist-info"))
    assert installed == ["torch-9.9.0+cpu.dist-info"]
    # `exec --site-packages-from`: nothing installed, the host Python's packages (yaml) importable.
    out = cli("exec", "loop", "--host", "0", "--site-packages-from", sys.executable, "--",
              "python", "-c", "import yaml; print('yaml from', yaml.__file__)")
    assert out.returncode == 0, out.stderr
    assert "yaml from" in out.stdout + out.stderr
