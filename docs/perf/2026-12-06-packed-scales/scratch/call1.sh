# Call 1 of the twenty-eighth session. First the MXFP4 tile's scale bytes packed box by box too
# (`Launch.mx_packed_scales`, the bench's packed field 2) against the arm (its bytes packed, its
# scales in padded rows) at 4, 8 (the expert loop), 16, 32 and 64 tokens (one pass), two draws,
# both ranks. fc1 on 128 rows a program at 32 and 64 tokens. Then the twenty-seventh session's prepared call (its scratch/next_call.sh), with
# the FP8 arm's fc1 (a tile at 90% of copy) and the packed scales' fc1 added: Nsight Compute on
# the arm's fc1 at 64 tokens and on the Gluon probe's tiled fc1 (draw A, 64 tokens), with the
# sections the twenty-sixth session read on the natural probe (its call3/ncu_fc1.txt); the
# probe's third launch is the tiled fc1 (the first two are the natural checks of fc1 and fc2).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BENCH_TIME_BUDGET_S=150 timeout 220 python3 tools/bench_grouped_decode.py /tmp/ps --precision w4a16 \
  --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:2" \
  --variant-tokens 4,8,16,32,64 > $OUT/packed_scales.log 2>&1
echo "bench rc=$?"; grep -A14 "^slowest" $OUT/packed_scales.log
cp -r /tmp/ps $OUT/ps
# fc1 on 128 rows a program (two warpgroups, 8 warps: a step's slots loaded once for twice the
# weight bytes), its scales padded or packed; fc2 the arm's (its 2,880 rows take 64).
BENCH_TIME_BUDGET_S=80 timeout 130 python3 tools/bench_grouped_decode.py /tmp/r128 --precision w4a16 \
  --tokens 32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:128:-:8:-:-:-:-:-:-:1,dot:-:128:-:8:-:-:-:-:-:-:1:-:-:2" \
  --variant-tokens 32,64 > $OUT/rows128.log 2>&1
echo "rows128 rc=$?"; grep -A10 "^slowest" $OUT/rows128.log
S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
for form in grouped-mxfp4 grouped-mxfp4-scales grouped-mxfp4-natural grouped; do
  k=_grouped_dot_mxfp4; [ $form = grouped ] && k=_grouped_dot_fp8
  timeout 60 ncu --clock-control none --launch-skip 2 --launch-count 1 -k regex:$k $S \
    python3 tools/ncu_kernels.py $form > $OUT/ncu_fc1_$form.txt 2>&1
  echo "$form rc=$?"; grep -i "dram throughput\|eligible\|issued warp\|achieved occupancy\|  duration" $OUT/ncu_fc1_$form.txt | head -8
done
D=docs/perf/2026-12-06-packed-mx/scratch
PYTHONPATH=$PYTHONPATH:$PWD/$D timeout 90 ncu --clock-control none -k regex:mx_probe --launch-skip 2 --launch-count 1 $S \
  python3 $D/probe_bench.py --tokens 64 --seeds 0 --variants 3:1:0:0:0:1 > $OUT/ncu_probe_tiled_fc1.txt 2>&1
echo "probe rc=$?"; grep -i "dram throughput\|eligible\|issued warp\|achieved occupancy\|  duration" $OUT/ncu_probe_tiled_fc1.txt | head -8
