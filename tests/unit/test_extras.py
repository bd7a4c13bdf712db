"""How to install an extra into the install at hand: one function builds every hint, and the
command it prints works there (clustertune is on no package index: `pip install
'clustertune[serve]'` finds nothing anywhere)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

from clustertune import extras
from clustertune.errors import UserError
from clustertune.extras import Install, extra_requirements, install_command, install_hint

ROOT = Path(__file__).resolve().parents[2]
REQUIRES = ("torch>=2.4", "fastapi>=0.110; extra == 'serve'", "uvicorn>=0.29; extra == \"serve\"",
            "deepspeed>=0.16; extra == 'deepspeed'", "ninja>=1.11; extra == 'deepspeed'",
            "lm-eval[hf]>=0.4.13; extra == 'lm-eval'", "fastapi>=0.110; extra == 'test'")


def clone(tmp_path: Path, name: str = "clustertune") -> Path:
    (tmp_path / "my clone" / "scripts").mkdir(parents=True)
    (tmp_path / "my clone" / "scripts" / "setup.sh").write_text("")
    (tmp_path / "my clone" / "pyproject.toml").write_text(f'[project]\nname = "{name}"\n')
    return tmp_path / "my clone"


def test_in_the_clones_own_venv_setup_sh_installs_it(tmp_path: Path) -> None:
    src = clone(tmp_path)
    here = Install("/x/python", src / ".venv", src, editable=True, requires=REQUIRES)
    assert install_command(here, ("serve",)) == f"bash '{src}/scripts/setup.sh' serve"
    assert install_command(here, ("deepspeed", "serve")) == f"bash '{src}/scripts/setup.sh' deepspeed serve"


def test_an_editable_install_elsewhere_installs_from_the_clone_into_its_environment(tmp_path: Path) -> None:
    src = clone(tmp_path)
    here = Install("/opt/env/bin/python", Path("/opt/env"), src, editable=True, requires=REQUIRES)
    assert install_command(here, ("serve",)) == f"/opt/env/bin/python -m pip install -e '{src}[serve]'"
    # DeepSpeed's ops compile on first use, not at install time
    assert install_command(here, ("deepspeed",)) == f"DS_BUILD_OPS=0 /opt/env/bin/python -m pip install -e '{src}[deepspeed]'"
    # installed from the directory, not editable: the same directory, not editable
    plain = Install("/opt/env/bin/python", Path("/opt/env"), src, editable=False, requires=REQUIRES)
    assert install_command(plain, ("serve",)) == f"/opt/env/bin/python -m pip install '{src}[serve]'"


def test_without_a_source_the_extras_own_requirements_are_installed() -> None:
    wheel = Install("/opt/env/bin/python", Path("/opt/env"), None, requires=REQUIRES)
    assert install_command(wheel, ("serve",)) == "/opt/env/bin/python -m pip install 'fastapi>=0.110' 'uvicorn>=0.29'"
    assert install_command(wheel, ("lm-eval",)) == "/opt/env/bin/python -m pip install 'lm-eval[hf]>=0.4.13'"
    assert shlex.split(install_command(wheel, ("deepspeed", "serve")))[5:] == [
        "deepspeed>=0.16", "ninja>=1.11", "fastapi>=0.110", "uvicorn>=0.29"]
    assert extra_requirements(REQUIRES, "test") == ["fastapi>=0.110"] and extra_requirements(REQUIRES, "nope") == []
    nothing = Install("/opt/env/bin/python", Path("/opt/env"), None)
    assert "clustertune[" not in install_command(nothing, ("serve",))


def test_this_clone_is_found_from_the_package_location() -> None:
    here = extras.this_install()
    assert here.source == ROOT and here.editable and here.python == sys.executable
    assert extra_requirements(here.requires, "serve") == ["fastapi>=0.110", "uvicorn>=0.29"]
    expected = (shlex.join(["bash", str(ROOT / "scripts" / "setup.sh"), "serve"])
                if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()
                else f"{shlex.quote(sys.executable)} -m pip install -e {shlex.quote(f'{ROOT}[serve]')}")
    assert install_hint("serve") == expected


def test_a_directory_named_otherwise_is_not_taken_for_a_clone(tmp_path: Path) -> None:
    assert not extras._is_clustertune_source(clone(tmp_path, name="something-else"))
    assert extras._is_clustertune_source(ROOT)


def test_no_hint_in_the_code_names_the_index_package() -> None:
    """Every install hint goes through install_hint: none spells `clustertune[extra]` itself."""
    src = ROOT / "src" / "clustertune"
    found = [f"{p.relative_to(src)}:{n}" for p in sorted(src.rglob("*.py")) if p.name != "extras.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"clustertune\[[a-z]", line)]
    assert found == []


def test_the_sites_print_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each site that needs an extra prints install_hint's command (here: a wheel's, from its metadata)."""
    from clustertune.api.serving import _require_extra, tinker_service
    from clustertune.models.adapters import require_bitsandbytes
    from clustertune.recipe.load import load_recipe
    from clustertune.recipe.trackers import check_trackers
    from clustertune.train.optim import _bitsandbytes
    from clustertune.use.lm_eval_bridge import require_lm_eval
    from tests.helpers import TINY_CAUSAL, with_

    requires = (*REQUIRES, "fastapi>=0.110; extra == 'tinker'", "uvicorn>=0.29; extra == 'tinker'",
                "tinker==0.38.0; extra == 'tinker'", "bitsandbytes>=0.45; extra == 'qlora'",
                "wandb>=0.19; extra == 'wandb'")
    monkeypatch.setattr(extras, "this_install", lambda: Install("/the/python", Path("/env"), None, requires=requires))
    pip = "/the/python -m pip install"
    for name in ("fastapi", "tinker", "bitsandbytes", "lm_eval"):
        monkeypatch.setitem(sys.modules, name, None)  # `import NAME` fails as it does where NAME is absent
    for call, says in ((_require_extra, f"{pip} 'fastapi>=0.110' 'uvicorn>=0.29'"),
                       (lambda: tinker_service(runs_root=None, device=None, dtype="auto", tinker_dir=None),
                        f"{pip} 'fastapi>=0.110' 'uvicorn>=0.29' tinker==0.38.0"),
                       (require_lm_eval, f"`{pip} 'lm-eval[hf]>=0.4.13'`"),
                       (require_bitsandbytes, f"`{pip} 'bitsandbytes>=0.45'`"),
                       (lambda: _bitsandbytes(load_recipe(with_(TINY_CAUSAL, train={"optimizer": "adamw_8bit"})),
                                              [{"params": []}]), f"{pip} 'bitsandbytes>=0.45'")):
        with pytest.raises(UserError) as err:
            call()
        assert says in str(err.value) and "clustertune[" not in str(err.value)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "wandb" else real_find_spec(n, *a))
    with pytest.raises(UserError, match=re.escape(f"`{pip} 'wandb>=0.19'` or remove it")):
        check_trackers(["wandb"])
