"""Training: node-side entry, the loop, checkpoints, metrics, throughput."""
