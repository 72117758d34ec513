# The probe with each step's weights and scales by cp.async in a ring (ring 1) beside the register
# loads one step ahead (ring 0) and the arm's tile; 32 and 64 tokens, two draws, rank 0.
set -u
export PYTHONPATH=$PWD:$PWD/tools:$PWD/docs/perf/2026-12-06-gluon-tile/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 400 python3 docs/perf/2026-12-06-gluon-tile/scratch/probe_bench.py --tokens 32,64 --seeds 0,1 \
  --rank 0 --variants 3:1:0,4:1:1,5:1:1,6:1:1 > $OUT/probe_ring.log 2>&1
echo "probe rc=$?"
grep "fc1+fc2\|error\|failed\|False" $OUT/probe_ring.log | tail -40
