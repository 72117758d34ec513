# MXFP4's one-pass tile now reads packed boxes by default (grouped_launch.MX_PACKED, from call 1).
# First the looping tile (4 and 8 tokens, below the one-pass count) packed against unpacked, two
# draws, both ranks; 256 values a step on the packed one-pass tile at 32 and 64 tokens; then the
# whole gated scenario on the new default.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BENCH_TIME_BUDGET_S=60 timeout 100 python3 tools/bench_grouped_decode.py /tmp/lp --precision w4a16 \
  --tokens 4,8 --seeds 0,1 --rank 0,1 --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:1" \
  --variant-tokens 4,8 > $OUT/loop_packed.log 2>&1
echo "bench rc=$?"; grep -A12 "^slowest" $OUT/loop_packed.log
# 256 values a step (128 bytes a row a box) on the packed one-pass tile: 3 and 4 stages at the
# arm's 80 registers, 3 stages at 96.
BENCH_TIME_BUDGET_S=70 timeout 110 python3 tools/bench_grouped_decode.py /tmp/k256 --precision w4a16 \
  --tokens 32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:256,dot:-:-:256:-:4,dot:-:-:256:-:-:-:-:96" --variant-tokens 32,64 \
  > $OUT/k256.log 2>&1
echo "k256 rc=$?"; grep -A12 "^slowest" $OUT/k256.log
DEADLINE=$(( $(date +%s) + 290 )) PER_RUN_TIMEOUT=260 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
