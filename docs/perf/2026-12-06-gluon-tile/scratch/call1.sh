# The Gluon probe of the MXFP4 tile beside the arm's tile (probe_bench.py), 32 and 64 tokens,
# two routing draws, rank 0; variants stages:barrier.
set -u
export PYTHONPATH=$PWD:$PWD/tools:$PWD/docs/perf/2026-12-06-gluon-tile/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 400 python3 docs/perf/2026-12-06-gluon-tile/scratch/probe_bench.py --tokens 32,64 --seeds 0,1 \
  --rank 0 --variants 4:1,3:1,6:1,4:0 > $OUT/probe.log 2>&1
echo "probe rc=$?"
grep -v "^$" $OUT/probe.log | tail -60
