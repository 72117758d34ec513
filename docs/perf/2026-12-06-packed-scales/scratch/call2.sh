# Call 2 of the twenty-eighth session: the MXFP4 tile's scales packed by default
# (grouped_launch.MX_PACKED_SCALES, from call 1). First the whole gated scenario on this tree; then
# where the warps of the arm's MXFP4 fc1 and fc2 and FP8 fc1 wait (Nsight Compute's stall
# reasons a warp, per issued instruction, at 64 tokens; tools/ncu_kernels.py: fc1 is the third
# launch of its kernel, fc2 the fourth).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEADLINE=$(( $(date +%s) + 290 )) PER_RUN_TIMEOUT=260 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
M="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
S="--section WarpStateStats --section SpeedOfLight"
for run in "grouped-mxfp4 _grouped_dot_mxfp4 2 fc1" "grouped-mxfp4 _grouped_dot_mxfp4 3 fc2" "grouped _grouped_dot_fp8 2 fc1"; do
  set -- $run
  timeout 60 ncu --clock-control none --launch-skip $3 --launch-count 1 -k regex:$2 $S $M \
    python3 tools/ncu_kernels.py $1 > $OUT/ncu_stalls_$1_$4.txt 2>&1
  echo "$1 $4 rc=$?"
  grep -E "issue_stalled|Duration|DRAM Throughput" $OUT/ncu_stalls_$1_$4.txt | awk '$NF+0 >= 0.3 || /Duration|DRAM/' | head -14
done
