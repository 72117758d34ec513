# Fourth call (thirty-fourth session): the producer's stream alone (read-only: each stage given
# back as it lands, zeros out) beside the probe's full tile (also at 64 registers: 4 programs an
# SM, 104 a consumer thread), on the same grids: 64 rows at 3
# programs an SM (80 registers) and 6 (40 registers), 128 rows at 2, and 8 stages; 32 and 64
# tokens, draw 0, both ranks. Is the tile or the memory system short of 85%?  About 60 s:
#   bash docs/perf/2026-12-07-ws-gluon/scratch/call4.sh
set -u
D=docs/perf/2026-12-07-ws-gluon/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
timeout 200 python3 $D/ws_bench.py --tokens 32,64 --seeds 0 --rank 0,1 \
  --variants 4:80,4:64,4:80:24:64:1,4:40:24:64:1,8:80:24:64:1,4:80:24:128,4:80:24:128:1 \
  > $OUT/ws_bench.log 2>&1
echo "bench rc=$?"
grep "failed\|Error\|not timed" $OUT/ws_bench.log | tail
grep "T=64 seed=0 rank=0" $OUT/ws_bench.log | grep " us," | sed 's/.*block_m=16 //'
