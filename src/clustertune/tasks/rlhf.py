"""``task: rlhf``: a policy tuned against rewards (GRPO, RLOO, PPO) or on preference pairs (DPO)
by TRL's trainers, which run their own loop on their own prompts (see the ``rl`` section);
clustertune feeds their metrics, checkpoints and stop requests into the run."""

from clustertune.tasks.base import Task

RLHF = Task(name="rlhf", summary="reinforcement learning from feedback",
            model_noun="A policy tuned with reinforcement learning")
