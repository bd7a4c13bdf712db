"""SSH clusters: hosts, envs, folder sync, remote functions with refs, remote objects, exec and
multi-host training, over plain OpenSSH and rsync. Nothing here imports torch."""
