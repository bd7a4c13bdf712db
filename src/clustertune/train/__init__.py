"""Training, the node side: one attempt's lifecycle (``attempt.py``), the rank's command
(``entry.py``), what a rank trains (``execute.py``), the loop, checkpoints, metrics, throughput,
strategies, TRL's trainers (``rl/``). May import tasks, data, models, remote, runs, recipe and
the bottom modules; never calls, launch, use, api or cli (topology and stop requests arrive
through the environment and the run directory)."""
