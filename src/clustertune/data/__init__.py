"""Data: sources (builtin corpus, local files, save_to_disk, hub), the shapes a task's data is
prepared into (``shapes.py``), fingerprints, the content-addressed cache, staging, loading.
Imports models, runs, recipe and below; never tasks, train or anything above (it follows the
traits a task's schema declares, never a task's name)."""
