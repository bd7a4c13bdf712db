"""Tasks as modules: one per task, each saying what makes it differ from the others (see
:mod:`clustertune.tasks.base`). Training, evaluation, the launcher and the CLI ask
:func:`task_of` instead of testing a task's name. Owns the task registry; imports nothing above
data (never train, use, launch, api or cli).
"""

from clustertune.tasks.base import TASKS, Task, find_task, register, task_of
from clustertune.tasks.causal_lm import CAUSAL_LM
from clustertune.tasks.reward_model import REWARD_MODEL
from clustertune.tasks.rlhf import RLHF
from clustertune.tasks.sequence_classification import SEQUENCE_CLASSIFICATION
from clustertune.tasks.sft import SFT

for _task in (CAUSAL_LM, SEQUENCE_CLASSIFICATION, SFT, RLHF, REWARD_MODEL):
    register(_task)

__all__ = ["CAUSAL_LM", "REWARD_MODEL", "RLHF", "SEQUENCE_CLASSIFICATION", "SFT", "TASKS", "Task", "find_task", "register", "task_of"]
