# Sixth call: the one-token sparse FP8 step with fc2 loading two steps' weights before its wait
# (fc2_peel_bench.py), four draws, both ranks. About a minute.
set -u
export PYTHONPATH=$PWD:$PWD/tools:$PWD/docs/perf/2026-12-06-one-token/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 docs/perf/2026-12-06-one-token/scratch/fc2_peel_bench.py > $OUT/fc2_peel.log 2>&1
echo "rc=$?"; grep -A8 "^slowest rank" $OUT/fc2_peel.log; grep " T=1 " $OUT/fc2_peel.log | cut -c1-220
