# Sixth call (twenty-fifth session): the FP8 sparse step with the one-token dependent launch at 2
# and 4 tokens, eight draws, both ranks (scratch/pdl_bench.py). About 2 minutes.
set -u
S=docs/perf/2026-12-06-sparse-ready/scratch
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 400 python3 $S/pdl_bench.py > $OUT/pdl_w8a16.log 2>&1; echo "bench rc=$?"
grep -A8 "^slowest rank" $OUT/pdl_w8a16.log
