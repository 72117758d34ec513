# The fourth call cut to what a nearly spent budget allows (thirty-fourth session): the producer's
# stream alone (read-only, zeros out) beside the full tile on the same grids (64 rows at 3 and 6
# programs an SM, 128 rows at 2), and the full tile at 64 registers (4 an SM); 32 and 64 tokens,
# draw 0, rank 0. About 40 s:  bash docs/perf/2026-12-07-ws-gluon/scratch/call5.sh
set -u
D=docs/perf/2026-12-07-ws-gluon/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
timeout 150 python3 $D/ws_bench.py --tokens 32,64 --seeds 0 --rank 0 \
  --variants 4:80,4:64,4:80:24:64:1,4:40:24:64:1,4:80:24:128:1 > $OUT/ws_bench.log 2>&1
echo "bench rc=$?"
grep "failed\|Error\|not timed" $OUT/ws_bench.log | tail
grep " us," $OUT/ws_bench.log | sed 's/ slots=.*block_m=16//'
