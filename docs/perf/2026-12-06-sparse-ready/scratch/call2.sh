# Second call (twenty-fifth session): where the expert-by-expert wait's cost lies in the sparse
# step. The one-token timeline of the arm's step, ready's (the package's [2, E] counters), and
# three ablations on counters a line each (ready_timeline.py's MODE: fc1's done signal alone,
# its started count alone, both with fc2 waiting on its expert's stripes), draws 0 and 2, rank 0
# (three and two local slots). About 2 minutes.
set -u
S=docs/perf/2026-12-06-sparse-ready/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 $S/ready_timeline.py --tokens 1 --seeds 0,2 --rank 0 \
  --kinds arm,ready,done_only,started_only,striped > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; grep -A5 "^T=1 seed=0 rank=0" $OUT/timeline.log | grep -v "^  fc2 window" | cut -c1-300
