# The probe: the ring variant timed as ring (call 2's "r1" rows timed the register loads: its
# lambda dropped the ring argument), the placement-only decode (timing only), 96 registers (5
# programs an SM); then Nsight Compute's warp states on the probe's fc1 at 64 tokens.
set -u
export PYTHONPATH=$PWD:$PWD/tools:$PWD/docs/perf/2026-12-06-gluon-tile/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=docs/perf/2026-12-06-gluon-tile/scratch
timeout 300 python3 $D/probe_bench.py --tokens 32,64 --seeds 0,1 --rank 0 \
  --variants 3:1:0,4:1:1,6:1:1,3:1:0:1,3:1:0:0:96 > $OUT/probe3.log 2>&1
echo "probe rc=$?"
grep "fc1+fc2\|error\|failed\|False" $OUT/probe3.log | tail -40
timeout 150 ncu --clock-control none -k regex:mx_probe --launch-skip 0 --launch-count 1 \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section SpeedOfLight \
  --section MemoryWorkloadAnalysis python3 $D/probe_bench.py --tokens 64 --seeds 0 --variants 3:1:0 \
  > $OUT/ncu_fc1.txt 2>&1
echo "ncu rc=$?"
grep -i "stall\|warp cycles\|issued\|eligible\|throughput\|occupancy" $OUT/ncu_fc1.txt | head -40
