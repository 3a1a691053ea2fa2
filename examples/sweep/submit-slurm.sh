#!/bin/sh
# Submit a tclab sweep to Slurm: a job array with one task per point, and the merge, which starts once
# every task has succeeded (docs/SWEEP.md).
#   examples/sweep/submit-slurm.sh OUT SCENARIO --set KEY=V1,V2 [--set …] [--seed N]
# Prints the two job ids. Slurm caps an array at MaxArraySize (1001 by default): split larger grids.
set -eu
here=$(dirname "$0")
out=$1
shift
n=$("${TCLAB:-tclab}" sweep "$@" --points)
mkdir -p "$out"
array=$(sbatch --parsable --array=0-$((n - 1)) --output="$out/slurm-%A_%a.log" \
    "$here/sweep.sbatch" "$out" "$@")
merge=$(sbatch --parsable --dependency=afterok:"$array" --output="$out/slurm-merge-%j.log" \
    "$here/sweep.sbatch" "$out" "$@")
echo "points: job $array ($n tasks); merge: job $merge; results in $out"
