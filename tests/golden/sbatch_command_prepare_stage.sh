#!/bin/bash
#SBATCH --cpus-per-task=8
#SBATCH --export=ALL
#SBATCH --gpus-per-node=4
#SBATCH --job-name=ct-main-1
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=B:USR2@90
#SBATCH --time=04:00:00
# clustertune run main-1: generated from its launch section and command.

CT_RUN_DIR=/shared/runs/main-1
CT_STOP_FILE="$CT_RUN_DIR"/stop-request
CT_MAX_REQUEUES=3

export CLUSTERTUNE_NNODES=2
export CLUSTERTUNE_RUN_DIR=/shared/runs/main-1
export CLUSTERTUNE_RUN_ID=main-1
export CLUSTERTUNE_STAGE='["/scratch/me/set"]'
export CLUSTERTUNE_STOP_GRACE=30
export HF_DATASETS_CACHE="$SLURM_TMPDIR/hf"
export OMP_NUM_THREADS=1
export PYTHONUNBUFFERED=1
export TOKENIZERS_PARALLELISM=false
# launch.env values that name variables expand again in every srun step, on the node that runs it:
# $SLURM_NODEID, $SLURM_TMPDIR are that node's own there (srun hands on this node's values).
CT_NODE_ENV='export HF_DATASETS_CACHE="$SLURM_TMPDIR/hf"'

step() { echo "[$(date -u +%Y-%m-%dT%H:%M:%SZ)] $*"; }

if ! [ -x /opt/venv/bin/python ]; then
  step "this node cannot run "/opt/venv/bin/python" (the submitting Python): the nodes must see it at the same path (a shared filesystem)"
  exit 2
fi

# A stop request (time limit: USR2; preemption: TERM) goes to the ranks through the stop file.
CT_STOP_SIGNAL=''
rm -f "$CT_STOP_FILE" "$CT_RUN_DIR"/cancel-request  # left by an earlier attempt
ct_stop() { CT_STOP_SIGNAL=$1; step "received SIG$1: asking the ranks to checkpoint and stop"; echo "$1" > "$CT_STOP_FILE"; }
trap 'ct_stop USR2' USR2
trap 'ct_stop TERM' TERM

CT_RESTART=${SLURM_RESTART_COUNT:-0}
CT_FIRST_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
CT_RDZV_HOST=$(scontrol show node "$CT_FIRST_NODE" | tr " " "\n" | sed -n "s/^NodeAddr=//p" | head -n 1)
CT_RDZV_HOST=${CT_RDZV_HOST:-$CT_FIRST_NODE}
export PET_RDZV_ENDPOINT="$CT_RDZV_HOST:$((20000 + SLURM_JOB_ID % 12000))"
export PET_RDZV_ID="$SLURM_JOB_ID-$CT_RESTART"
# Ranks per node: one per GPU SLURM allocated on this node, else what the recipe asked.
CT_NPROC=${SLURM_GPUS_ON_NODE:-4}
if ! [ "$CT_NPROC" -ge 1 ] 2>/dev/null; then CT_NPROC=1; fi
# Your own command: its attempt (1 + earlier attempts + requeues), and for launch.runner=none
# the values of {master_addr} and {master_port} (each node's {node_rank} is its SLURM_NODEID).
export CLUSTERTUNE_ATTEMPT=$(( ${CT_FIRST_ATTEMPT:-1} + CT_RESTART ))
export CLUSTERTUNE_MASTER_ADDR="$CT_RDZV_HOST" CLUSTERTUNE_MASTER_PORT="${PET_RDZV_ENDPOINT##*:}"
# launch.prepare: once, on the first node, before the command starts and launch.stage copies its paths;
# a requeued or resumed attempt finds it done.
if [ ! -f "$CT_RUN_DIR"/prepared ]; then
  step "prepare: one task on the first node (launch.prepare)"
  srun --nodes=1 --ntasks=1 --relative=0 --cpus-per-task=8 --open-mode=append --output="$CT_RUN_DIR"/logs/prepare.log /bin/bash -c "$CT_NODE_ENV"'; exec "$@"' ct-node /bin/bash -c 'python prepare_data.py --out $SCRATCH/set'
  CT_RC=$?
  if [ "$CT_RC" != 0 ]; then step "prepare: failed with code $CT_RC (logs/prepare.log)"; exit "$CT_RC"; fi
  touch "$CT_RUN_DIR"/prepared
  step "prepare: done"
fi
step "train: job $SLURM_JOB_ID (restart $CT_RESTART) on $SLURM_JOB_NODELIST, rendezvous $PET_RDZV_ENDPOINT"
srun --kill-on-bad-exit=1 --ntasks-per-node=1 --ntasks=2 --cpus-per-task=8 --open-mode=append --output="$CT_RUN_DIR"/logs/node-%n.log \
  /bin/bash -c "$CT_NODE_ENV"'; exec "$@"' ct-node /opt/venv/bin/python -m torch.distributed.run --nnodes=2 --nproc-per-node=$CT_NPROC --max-restarts=0 --rdzv-backend=c10d --rdzv-conf=join_timeout=900,read_timeout=60 -m clustertune.script.rank python main.py &
CT_PID=$!
# bash runs a trap only between commands: wait again after each signal until srun is gone.
while true; do wait "$CT_PID"; CT_RC=$?; kill -0 "$CT_PID" 2>/dev/null || break; done
step "train: ended with code $CT_RC"
if [ "$CT_RC" = 0 ] && [ -z "$CT_STOP_SIGNAL" ]; then step "done"; exit 0; fi
# SIGTERM (preemption, scancel) is SLURM's to act on: a preempted job with --requeue goes back
# to the queue by itself, a cancelled one must not. The time-limit signal is ours to requeue.
if [ "$CT_STOP_SIGNAL" = USR2 ]; then
  if [ "$CT_RESTART" -lt "$CT_MAX_REQUEUES" ]; then
    step "requeue: the job resumes from its last checkpoint"
    scontrol requeue "$SLURM_JOB_ID"
    exit 0
  fi
  step "not requeued: the time limit was reached after $CT_RESTART requeue(s) (launch.max_requeues)"
  exit 3
fi
exit "$CT_RC"
