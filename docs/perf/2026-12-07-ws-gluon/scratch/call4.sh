# Fourth call (thirty-fourth session): the producer's stream alone (read-only: each stage given
# back as it lands, zeros out) beside the probe's full tile (also at 64 registers: 4 programs an
# SM, 104 a consumer thread), on the same grids: 64 rows at 3
# programs an SM (80 registers) and 6 (40 registers), 128 rows at 2, and 8 stages; 32 and 64
# tokens, draw 0, both ranks; then Nsight Compute on the read-only stream and the 64-register
# launch. Is the tile or the memory system short of 85%?  About 80 s:
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
# Nsight Compute on the read-only stream and on the 64-register launch (64 tokens).
M="smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
for s in long_scoreboard short_scoreboard not_selected selected wait math_pipe_throttle \
    mio_throttle dispatch_stall lg_throttle membar gmma branch_resolving no_instruction sleeping; do
  M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="$M,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum"
M="$M,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,smsp__inst_executed.sum"
M="$M,gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread"
M="$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active"
timeout 150 ncu --clock-control none --launch-skip 6 --launch-count 6 -k regex:mx_ \
  --section SpeedOfLight --section Occupancy --metrics "$M" \
  python3 $D/ws_bench.py --tokens 64 --seeds 0 --rank 0 --variants 4:80:24:64:1,4:64 --ncu \
  > $OUT/ncu_ws.txt 2>&1
echo "ncu rc=$?"
grep -E "^  mx_|ncu launch|Duration|DRAM Throughput|issue_active" $OUT/ncu_ws.txt | head -40
