# Ninth call (twenty-fifth session): both formats' copy shares at 1, 32 and 64 tokens (on an H200
# if one is lent: where issue 28's targets are set), then the twenty-fourth session's local-first
# A/B again where it was confounded, with tools/sparse_ab.steps_with now calling the kind's GEMV
# with the arm's own arguments (MXFP4 at 1, 2, 4 tokens, FP8 at 2 and 4; four draws, both ranks).
# About 4 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for pr in w8a16 w4a16; do
  timeout 80 python3 tools/bench_grouped_decode.py /tmp/c_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  grep "^$pr " $OUT/copy_share_$pr.log | head -12
done
timeout 60 python3 docs/perf/2026-12-06-one-token/scratch/local_bench.py --precision w4a16 > $OUT/local_w4a16.log 2>&1; echo "w4a16 rc=$?"
grep -A8 "^slowest rank" $OUT/local_w4a16.log
timeout 50 python3 docs/perf/2026-12-06-one-token/scratch/local_bench.py --precision w8a16 --tokens 2,4 > $OUT/local_w8a16.log 2>&1; echo "w8a16 rc=$?"
grep -A8 "^slowest rank" $OUT/local_w8a16.log
