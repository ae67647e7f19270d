#!/usr/bin/env bash
# Profiles a sample of a design space as a Slurm job array: each array task measures its own
# deterministic share of the configurations (carb profile --shard auto) into its own SQLite
# file, and a last job, started when every task has ended, merges the shards into one database.
#
#   sbatch examples/slurm/profile-array.sh            # 8 tasks, cpu-demo.yaml, 400 configurations
#   SPEC=examples/spaces/paper.yaml SAMPLE=2000 sbatch --array=0-31 examples/slurm/profile-array.sh
#   sbatch examples/slurm/profile-array.sh --max-time 2 --target-ci 0.02   # protocol options
#
# Tasks that die (node failure, time limit, preemption) lose only the configuration they were
# measuring: resubmit the same array and each task resumes from its file. To rerun only some
# tasks of an --array=0-7 run, say how many shards there are, since Slurm counts only the tasks
# submitted:  SHARDS=8 sbatch --array=3,7 examples/slurm/profile-array.sh
# Every task must see the same spec, sample and seed, or the shares no longer partition one
# campaign. The merge is safe to repeat (docs/distributed.md).
#
#SBATCH --job-name=carb-profile
#SBATCH --array=0-7
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=carb-profile-%A_%a.log
set -euo pipefail

carb="${CARB:-build/src/cli/carb}"
spec="${SPEC:-examples/spaces/cpu-demo.yaml}"
sample="${SAMPLE:-400}"
seed="${SEED:-1}"
out="${OUT:-out/slurm}"
mkdir -p "$out"

if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then
  echo "profile-array.sh: not a Slurm array task; submit it with sbatch (or run carb profile" \
       "--shard K/N yourself)" >&2
  exit 2
fi

# The first task submits the merge of every shard file, to run once the whole array has ended
# whatever the tasks' exit codes: a shard that stopped part-way still merges what it measured.
if [ "$SLURM_ARRAY_TASK_ID" = "${SLURM_ARRAY_TASK_MIN:-0}" ]; then
  sbatch --dependency="afterany:${SLURM_ARRAY_JOB_ID}" --job-name=carb-merge --ntasks=1 \
         --time=00:30:00 --output="carb-merge-%j.log" \
         --wrap="'$carb' merge --db '$out/campaign.sqlite' '$out'/shard-*.sqlite"
fi

# --shard auto reads SLURM_ARRAY_TASK_ID/_MIN/_STEP/_COUNT; with SHARDS set, the task id is
# the shard. {shard} names this task's file.
shard="auto"
if [ -n "${SHARDS:-}" ]; then
  shard="${SLURM_ARRAY_TASK_ID}/${SHARDS}"
fi
exec "$carb" profile --spec "$spec" --sample "$sample" --seed "$seed" --sampling stratified \
     --device cpu --shard "$shard" --db "$out/shard-{shard}.sqlite" \
     --time-budget "${TIME_BUDGET:-3h50m}" "$@"
