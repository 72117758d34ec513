# Second call: the one-token sparse FP8 step program by program (gemv_timeline.py), four draws,
# both ranks. About a minute.
set -u
export PYTHONPATH=$PWD:$PWD/tools
S=docs/perf/2026-12-06-one-token/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 python3 $S/gemv_timeline.py --tokens 1 --seeds 0,1,2,3 --rank 0,1 > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; cat $OUT/timeline.log | cut -c1-400
