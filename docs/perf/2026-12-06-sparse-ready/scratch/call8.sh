# Eighth call (twenty-fifth session): MXFP4's sparse step (dependent launches triggered at each
# program's start, the arm's at every count) against the trigger once the slot is local, 1, 2 and
# 4 tokens, eight draws, both ranks (scratch/pdl_bench.py). About 1 minute.
set -u
S=docs/perf/2026-12-06-sparse-ready/scratch
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 400 python3 $S/pdl_bench.py --precision w4a16 --tokens 1,2,4 > $OUT/pdl_w4a16.log 2>&1; echo "bench rc=$?"
grep -A8 "^slowest rank" $OUT/pdl_w4a16.log
