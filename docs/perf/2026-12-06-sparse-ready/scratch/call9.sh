# Ninth call (twenty-fifth session): the twenty-fourth session's local-first A/B again, with
# tools/sparse_ab.steps_with now calling the kind's GEMV with the arm's own arguments (MXFP4's
# rotated weights and quads, FP8's quads from 2 tokens; before, the kind ran natural MXFP4 weights
# and the broadcast load at every count). Both formats, 1, 2 and 4 tokens, four draws, both
# ranks. Then both formats' copy shares at 1, 32 and 64 tokens (on an H200 if one is lent: where
# issue 28's targets are set). About 4 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for pr in w8a16 w4a16; do
  timeout 100 python3 docs/perf/2026-12-06-one-token/scratch/local_bench.py --precision $pr > $OUT/local_$pr.log 2>&1; echo "$pr rc=$?"
  grep -A12 "^slowest rank" $OUT/local_$pr.log
done
for pr in w8a16 w4a16; do
  timeout 80 python3 tools/bench_grouped_decode.py /tmp/c_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  grep "^$pr " $OUT/copy_share_$pr.log | head -12
done
