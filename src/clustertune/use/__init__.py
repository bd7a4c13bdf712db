"""Using what a run trained: load it, generate, chat, evaluate, export."""
