"""Data: sources (builtin corpus, local files, save_to_disk, hub), preparation, loading."""
