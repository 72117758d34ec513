# The thirty-eighth session's second call: what any one- or two-token step can reach under this
# timer. bench_grouped_decode --floor times, beside the three arms' steps, the touched experts'
# fc1 and fc2 values read in two launches (the floor of a step whose GEMVs are two kernels), in
# one launch (the floor of a step that is a single kernel) and an empty launch (the timer's floor
# for a graph of one kernel). FP8 and MXFP4, 1 and 2 tokens, draws 0-1, both ranks. About 200 s:
#   bash docs/perf/2026-12-07-one-token/scratch/call2.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BENCH_TIME_BUDGET_S=60 timeout 400 python3 tools/bench_grouped_decode.py /tmp/floor \
  --tokens 1,2 --floor 1,2 --variants="-:-:-:-:-" --variant-tokens 64 --seeds 0,1 --rank 0,1 \
  > $OUT/floor.log 2>&1
echo "floor rc=$?"
grep "arm=read_floor" $OUT/floor.log | sed "s/ weight_bytes.*step_us=/ step_us=/" | cut -c1-220
grep -A40 "slowest of ranks" $OUT/floor.log
