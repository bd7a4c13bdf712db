"""The upkeep half of the host helper: building envs, the host check, `down` and `gc`.

Shipped beside ``_clustertune_runner.py`` (as ``_clustertune_runner_host.py``); standard library
only. Run states, cancelling and GPU queries stay in the helper itself, reached through ``base``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

# The host helper that loaded this module: set by that helper when it loads this one, so the
# dependency runs one way, helper -> upkeep, on a host and in the client's package alike.
base = None


TORCH_BUILDS = ("torch", "torchvision", "torchaudio")


def _requirement_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return m.group(1).lower().replace("_", "-") if m else ""


def pip_commands(spec: dict, py: str, gpus: int) -> list:
    """The pip installs that build an env from ``spec`` on a host with ``gpus`` GPUs. Without
    GPUs, torch comes first from the CPU index (the later install finds it satisfied)."""
    base = [py, "-m", "pip", "install", "--disable-pip-version-check", *spec.get("pip_args", [])]
    indexes = ["--index-url", spec["index_url"]] if spec.get("index_url") else []
    for url in spec.get("extra_index_urls", []):
        indexes += ["--extra-index-url", url]
    reqs = list(spec.get("requirements") or [])
    torch = [r for r in reqs if _requirement_name(r) in TORCH_BUILDS]
    cmds = []
    if torch and not gpus and spec.get("torch_cpu_index"):
        cmds.append([*base, "--index-url", spec["torch_cpu_index"], *torch])
    if reqs:
        cmds.append([*base, *indexes, *reqs])
    return cmds


def verb_build_env(root: str, env_hash: str) -> int:
    """Create envs/<hash> from the JSON spec on stdin; pip's output streams to stderr."""
    import fcntl

    spec = base._read_header()
    envs = os.path.join(root, "envs")
    os.makedirs(envs, exist_ok=True)
    final = os.path.join(envs, env_hash)
    with open(os.path.join(envs, f".{env_hash}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two clients building the same env: the second waits
        if os.path.exists(os.path.join(final, ".ready")):
            return 0
        tmp = final + ".building"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(final, ignore_errors=True)
        cmd = [sys.executable, "-m", "venv"]
        if spec.get("system_site_packages"):
            cmd.append("--system-site-packages")
        needs_pip = bool(spec.get("requirements"))
        if not needs_pip:
            cmd.append("--without-pip")
        subprocess.run(cmd + [tmp], check=True, stdout=sys.stderr)
        py = os.path.join(tmp, "bin", "python")
        if spec.get("site_packages_from"):
            out = subprocess.run([spec["site_packages_from"], "-c", "import site, json; print(json.dumps(site.getsitepackages()))"],
                                 capture_output=True, text=True, check=True).stdout
            purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                     capture_output=True, text=True, check=True).stdout.strip()
            # addsitedir (not a bare path line) so the .pth files there work too (editable installs).
            with open(os.path.join(purelib, "_clustertune_inherited.pth"), "w") as fh:
                fh.write("".join(f"import site; site.addsitedir({d!r})\n" for d in json.loads(out)))

        pip_env = {**os.environ, **(spec.get("pip_env") or {})}
        for cmd in pip_commands(spec, py, len(base._gpus().query_gpus())):
            if subprocess.call(cmd, stdout=sys.stderr, env=pip_env) != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise SystemExit(10)
        with open(os.path.join(tmp, ".ready"), "w") as fh:
            json.dump(spec, fh)
        os.replace(tmp, final)
    return 0


def verb_check(root: str) -> int:
    info = {"python": sys.version.split()[0], "executable": sys.executable, "root": root, "gpus": base._gpus().query_gpus()}
    os.makedirs(root, exist_ok=True)
    du = shutil.disk_usage(root)
    info["free_disk_gib"] = round(du.free / 2**30, 1)
    envs = os.path.join(root, "envs")
    info["envs"] = sorted(e for e in os.listdir(envs) if os.path.exists(os.path.join(envs, e, ".ready"))) if os.path.isdir(envs) else []
    print(json.dumps(info))
    return 0


def verb_down(root: str) -> int:
    """Stop every run and object clustertune started under this root."""
    stopped = []
    runs = os.path.join(root, "runs")
    for key in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        st = base._status(os.path.join(runs, key))
        if st.get("state") == "RUNNING":
            with open(os.devnull, "w") as devnull:
                old = sys.stdout
                sys.stdout = devnull
                try:
                    base.verb_cancel(root, key)
                finally:
                    sys.stdout = old
            stopped.append(key)
    agents = os.path.join(root, "agents")
    for name in sorted(os.listdir(agents)) if os.path.isdir(agents) else []:
        try:
            with open(os.path.join(agents, name)) as fh:
                os.kill(int(fh.read().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
        os.unlink(os.path.join(agents, name))
    print(json.dumps({"stopped": stopped}))
    return 0


def verb_gc(root: str, older_than_days: float, keep_envs: list[str]) -> int:
    """Remove finished runs older than the limit, code snapshots and envs no run uses now."""
    removed = []
    cutoff = time.time() - older_than_days * 86400
    runs = os.path.join(root, "runs")
    for key in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        rdir = os.path.join(runs, key)
        st = base._status(rdir)
        if st.get("state") in base.TERMINAL and st.get("updated", 0) < cutoff:
            shutil.rmtree(rdir, ignore_errors=True)
            removed.append(f"runs/{key}")
    for sub in ("envs", "code"):
        folder = os.path.join(root, sub)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            path = os.path.join(folder, name)
            if name.startswith(".") or name in keep_envs or not os.path.isdir(path):
                continue
            if os.path.getmtime(path) < cutoff:
                shutil.rmtree(path, ignore_errors=True)
                removed.append(f"{sub}/{name}")
    print(json.dumps({"removed": removed}))
    return 0
