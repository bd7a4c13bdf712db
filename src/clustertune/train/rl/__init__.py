"""RLHF on TRL's trainers (GRPO, RLOO, DPO), wired into clustertune's runs.

``preflight_rl`` checks a recipe before a run exists; ``execute_rl`` runs it into a run
directory. Both are the only entry points the rest of clustertune calls.
"""

from clustertune.train.rl.checks import preflight_rl
from clustertune.train.rl.runner import execute_rl

__all__ = ["execute_rl", "preflight_rl"]
