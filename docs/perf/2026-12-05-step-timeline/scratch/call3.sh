# The third call: fc1 and fc2 fused into one persistent launch (scratch/fused.py) against the arm's
# grouped FP8 step, 16-64 tokens, three routing draws, both ranks; each step checked first (the
# reference, the sentinels, the arm's output bit for bit, the counters back to zero).
set -u
export PYTHONPATH=$PWD:$PWD/tools
D=docs/perf/2026-12-05-step-timeline/scratch
timeout 400 python3 $D/fused.py --tokens 16,32,64 --seeds 0,1,2 --rank 0,1 --per-sm 6,6e > $OUT/fused.log 2>&1
echo "fused rc=$?"; tail -45 $OUT/fused.log
