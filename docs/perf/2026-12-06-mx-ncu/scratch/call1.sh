# Call 1 of the twenty-eighth session: the twenty-seventh's prepared call (its scratch/next_call.sh),
# with the FP8 arm's fc1 added as the reference of a tile at 90% of copy. Where the packed MXFP4
# tile's time goes now: Nsight Compute on the arm's fc1 at 64 tokens, packed (the arm's), natural
# (the form before the twenty-seventh session) and FP8 (the arm's), then on the Gluon probe's
# tiled fc1 (draw A, 64 tokens), with the sections the twenty-sixth session read on the natural
# probe (its call3/ncu_fc1.txt); the probe's third launch is the tiled fc1 (the first two are the
# natural checks of fc1 and fc2). About 4 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
for form in grouped-mxfp4 grouped-mxfp4-natural grouped; do
  k=_grouped_dot_mxfp4; [ $form = grouped ] && k=_grouped_dot_fp8
  timeout 120 ncu --clock-control none --launch-skip 2 --launch-count 1 -k regex:$k $S \
    python3 tools/ncu_kernels.py $form > $OUT/ncu_fc1_$form.txt 2>&1
  echo "$form rc=$?"; grep -i "dram throughput\|eligible\|issued warp\|stall\|achieved occupancy" $OUT/ncu_fc1_$form.txt | head -12
done
D=docs/perf/2026-12-06-packed-mx/scratch
PYTHONPATH=$PYTHONPATH:$PWD/$D timeout 150 ncu --clock-control none -k regex:mx_probe --launch-skip 2 --launch-count 1 $S \
  python3 $D/probe_bench.py --tokens 64 --seeds 0 --variants 3:1:0:0:0:1 > $OUT/ncu_probe_tiled_fc1.txt 2>&1
echo "probe rc=$?"; grep -i "dram throughput\|eligible\|issued warp\|stall\|achieved occupancy" $OUT/ncu_probe_tiled_fc1.txt | head -12
