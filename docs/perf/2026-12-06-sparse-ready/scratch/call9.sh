# Ninth call (twenty-fifth session): the twenty-fourth session's local-first A/B again, with
# tools/sparse_ab.steps_with now calling the kind's GEMV with the arm's own arguments (MXFP4's
# rotated weights and quads, FP8's quads from 2 tokens; before, the kind ran natural MXFP4 weights
# and the broadcast load at every count). Both formats, 1, 2 and 4 tokens, four draws, both
# ranks. About 1 minute.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for pr in w8a16 w4a16; do
  timeout 200 python3 docs/perf/2026-12-06-one-token/scratch/local_bench.py --precision $pr > $OUT/local_$pr.log 2>&1; echo "$pr rc=$?"
  grep -A12 "^slowest rank" $OUT/local_$pr.log
done
