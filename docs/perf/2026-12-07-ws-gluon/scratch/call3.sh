# Third call (thirty-fourth session): the warp-specialised probe on 64- and 128-row tiles (two
# consumer warpgroups sharing each step's x: half the x read from L2 a weight byte; fc1 only, as
# fc2's 2,880 rows are not a multiple of 128), and at 96 registers (2 programs an SM), timed at
# 32 and 64 tokens, draws 0 and 1, both ranks; then Nsight Compute on the earlier tiled probe and
# the new one at 64 tokens (draw 0, rank 0). About 200 s:
#   bash docs/perf/2026-12-07-ws-gluon/scratch/call3.sh
set -u
D=docs/perf/2026-12-07-ws-gluon/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
timeout 200 python3 $D/ws_bench.py --tokens 32,64 --seeds 0,1 --rank 0,1 \
  --variants 4:80,4:80:24:128,8:80:24:128,4:96 > $OUT/ws_bench.log 2>&1
echo "bench rc=$?"
grep "fc1+fc2\|failed\|Error\|not timed" $OUT/ws_bench.log | tail -40
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
  python3 $D/ws_bench.py --tokens 64 --seeds 0 --rank 0 --variants 4:80,4:80:24:128 --ncu \
  > $OUT/ncu_ws.txt 2>&1
echo "ncu rc=$?"
grep -E "^  mx_|ncu launch|Duration|DRAM Throughput|L2 Cache Throughput|issue_active|inst_executed" \
  $OUT/ncu_ws.txt | head -60
