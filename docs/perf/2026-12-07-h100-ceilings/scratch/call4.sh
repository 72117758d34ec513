# The thirty-third session's fourth call: where the thirty-second session's persistent, evenly
# split grid (`Launch.stream_k`, 6 programs an SM) lost 23-35% against the arm's one-pass grid
# (PERF mx_stream_k_stages), read by Nsight Compute on both grids' fc1 and fc2 at 64 tokens
# (tools/ncu_kernels.py grouped-mxfp4 and grouped-mxfp4-stream; the second iteration's launches).
# About 150 s:  bash docs/perf/2026-12-07-h100-ceilings/scratch/call4.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
M="smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
for s in long_scoreboard short_scoreboard not_selected selected wait math_pipe_throttle \
    mio_throttle dispatch_stall lg_throttle membar gmma branch_resolving no_instruction; do
  M="$M,smsp__average_warps_issue_stalled_${s}_per_issue_active.ratio"
done
M="$M,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct"
M="$M,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,smsp__inst_executed.sum"
M="$M,gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread"
for form in mxfp4 mxfp4-stream; do
  timeout 120 ncu --clock-control none --launch-skip 2 --launch-count 2 \
    -k regex:_grouped_dot_mxfp4 --section SpeedOfLight --section Occupancy --metrics "$M" \
    python3 tools/ncu_kernels.py grouped-$form > $OUT/ncu_grouped-$form.txt 2>&1
  echo "$form rc=$?"
  grep -E "^  _grouped|Duration|DRAM Throughput|dram__bytes_read|sector_hit|cycles_active|inst_executed|grid_size|stalled_(barrier|long|not_sel|wait|short|math)" \
    $OUT/ncu_grouped-$form.txt
done
