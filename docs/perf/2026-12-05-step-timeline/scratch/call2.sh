# The second call: call1's timeline again (its stamp buffers fixed to whole rows).
set -u
export PYTHONPATH=$PWD:$PWD/tools
D=docs/perf/2026-12-05-step-timeline/scratch
timeout 300 python3 $D/timeline.py --tokens 16,32,64 --seeds 0 --rank 0,1 --reps 5 --splits 1,2,3 > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; grep -v "^$" $OUT/timeline.log | tail -80
