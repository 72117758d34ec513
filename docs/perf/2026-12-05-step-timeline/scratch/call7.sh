# The seventh call: the fused candidate again, waiting on plain volatile reads (6s) beside the
# atomic reads of call3 (6), with where its outputs differ from the arm's; 16 and 64 tokens.
set -u
export PYTHONPATH=$PWD:$PWD/tools
D=docs/perf/2026-12-05-step-timeline/scratch
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 $D/fused.py --tokens 16,64 --seeds 0,1 --rank 0,1 --per-sm 6,6s > $OUT/fused.log 2>&1
echo "fused rc=$?"; tail -40 $OUT/fused.log
