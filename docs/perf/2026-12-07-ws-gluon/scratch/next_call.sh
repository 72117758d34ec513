# Prepared for the next session, not run (the thirty-fourth session's calls 4 and 5 found no
# machine): the warp-specialised probe's open questions, 32 and 64 tokens, draw 0, both ranks.
#  1. Is the tile or the memory system short of 85%? The producer's stream alone (read-only: each
#     stage given back as it lands, zeros out) on the same grids: 64 rows at 3 programs an SM (80
#     registers) and 6 (40), 128 rows at 2.
#  2. Occupancy: the full tile at 64 registers (4 programs an SM; the consumer 104, offline still
#     asynchronous).
#  3. Barrier traffic: two K steps a stage (`mx_ws_pairs_kernel`: one `ready` wait and one `empty`
#     arrive, each with its partition-wide bar.sync, per two steps), on 2 and 4 pairs.
# Then Nsight Compute on the read-only stream, the 64-register launch and the paired stages at
# 64 tokens. About 120 s:  bash docs/perf/2026-12-07-ws-gluon/scratch/next_call.sh
set -u
D=docs/perf/2026-12-07-ws-gluon/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$D
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
V="4:80,4:64,4:80:24:64:1,4:40:24:64:1,4:80:24:128:1,2:80:24:64:0:1,4:80:24:64:0:1"
timeout 200 python3 $D/ws_bench.py --tokens 32,64 --seeds 0 --rank 0,1 --variants $V \
  > $OUT/ws_bench.log 2>&1
echo "bench rc=$?"
grep "failed\|Error\|not timed" $OUT/ws_bench.log | tail
grep "T=64 seed=0 rank=0" $OUT/ws_bench.log | grep " us," | sed 's/.*block_m=16 //'
M="smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
for s in long_scoreboard short_scoreboard not_selected selected wait math_pipe_throttle \
    mio_throttle dispatch_stall lg_throttle membar gmma branch_resolving no_instruction sleeping; do
  M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="$M,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_bytes.sum"
M="$M,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,smsp__inst_executed.sum"
M="$M,gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread"
M="$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active"
# the checks launch 2 + 2 a variant (8), then --ncu launches the same 8 once more
timeout 200 ncu --clock-control none --launch-skip 8 --launch-count 8 -k regex:mx_ \
  --section SpeedOfLight --section Occupancy --metrics "$M" \
  python3 $D/ws_bench.py --tokens 64 --seeds 0 --rank 0 \
  --variants 4:80:24:64:1,4:64,2:80:24:64:0:1 --ncu > $OUT/ncu_ws.txt 2>&1
echo "ncu rc=$?"
grep -E "^  mx_|ncu launch|Duration|DRAM Throughput|issue_active" $OUT/ncu_ws.txt | head -50
