#!/bin/bash
#SBATCH --cpus-per-task=32
#SBATCH --export=ALL
#SBATCH --gres=gpu:a100:8
#SBATCH --job-name=gpt2_multi
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --signal=B:USR2@90
#SBATCH --time=1-00:00:00
#SBATCH --tmp=1500G
# clustertune run tiny-1: generated from its recipe.

CT_RUN_DIR=/shared/runs/tiny-1
CT_STOP_FILE="$CT_RUN_DIR"/stop-request
CT_MAX_REQUEUES=3

export HF_HOME="$SCRATCH/hf"
export OMP_NUM_THREADS=1
export PRICE="\$5 \`x\` \"q\" \\"
export PYTHONUNBUFFERED=1
export RUN_TAG="${SLURM_JOB_ID}-a"
export TOKENIZERS_PARALLELISM=false
# launch.env values that name variables expand again in every srun step, on the node that runs it:
# $SLURM_NODEID, $SLURM_TMPDIR are that node's own there (srun hands on this node's values).
CT_NODE_ENV='export HF_HOME="$SCRATCH/hf"; export RUN_TAG="${SLURM_JOB_ID}-a"'

step() { echo "[$(date -u +%Y-%m-%dT%H:%M:%SZ)] $*"; }

step "setup"
set -e
trap 'CT_RC=$?; step "setup: a line failed with code $CT_RC (launch.setup); stopping"' ERR
module load cuda/12.4
trap - ERR
set +e

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
CT_NPROC=${SLURM_GPUS_ON_NODE:-8}
if ! [ "$CT_NPROC" -ge 1 ] 2>/dev/null; then CT_NPROC=1; fi
# Data: prepared once, as this job's first step (a cache hit if any run prepared it before);
# a requeued job, or one whose data was prepared before submitting (launch.prepare_data), has it.
if [ ! -f "$CT_RUN_DIR"/data.json ]; then
  step "data: prepare (one task)"
  srun --nodes=1 --ntasks=1 --cpus-per-task=32 --open-mode=append --output="$CT_RUN_DIR"/logs/data.log /bin/bash -c "$CT_NODE_ENV"'; exec "$@"' ct-node /opt/venv/bin/python -m clustertune.data.job_step "$CT_RUN_DIR"
  CT_RC=$?
  if [ "$CT_RC" != 0 ]; then step "data: failed with code $CT_RC (logs/data.log)"; exit "$CT_RC"; fi
  step "data: ready"
fi
step "train: job $SLURM_JOB_ID (restart $CT_RESTART) on $SLURM_JOB_NODELIST, rendezvous $PET_RDZV_ENDPOINT"
srun --kill-on-bad-exit=1 --ntasks-per-node=1 --ntasks=2 --cpus-per-task=32 --open-mode=append --output="$CT_RUN_DIR"/logs/node-%n.log \
  /bin/bash -c "$CT_NODE_ENV"'; exec "$@"' ct-node /opt/venv/bin/python -m torch.distributed.run --nnodes=2 --nproc-per-node=$CT_NPROC --max-restarts=0 --rdzv-backend=c10d --rdzv-conf=join_timeout=900,read_timeout=60 -m clustertune.train.entry /shared/runs/tiny-1 &
CT_PID=$!
# bash runs a trap only between commands: wait again after each signal until srun is gone.
while true; do wait "$CT_PID"; CT_RC=$?; kill -0 "$CT_PID" 2>/dev/null || break; done
step "train: ended with code $CT_RC"
if [ "$CT_RC" = 0 ] && [ -f "$CT_RUN_DIR/summary.json" ]; then step "done"; exit 0; fi
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
