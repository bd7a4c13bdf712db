"""Using what a run trained: load it, generate, chat, evaluate, export. Beside launch (neither
imports the other); imports calls, train, tasks, data, models, runs and below; never api or cli."""
