# Fourth call (twenty-fifth session): the one-token FP8 GEMV's programs asking the L2 for their
# own rows at their start (ready_timeline.py MODE 4-6: fc1 and fc2, fc1 only, fc2 only), on the
# timeline beside the arm's step, draws 0-3, both ranks. About 1 minute.
set -u
S=docs/perf/2026-12-06-sparse-ready/scratch
export PYTHONPATH=$PWD:$PWD/tools:$PWD/$S
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 $S/ready_timeline.py --tokens 1 --seeds 0,1,2,3 --rank 0,1 \
  --kinds arm,pf_both,pf_fc1,pf_fc2 > $OUT/timeline_pf.log 2>&1
echo "timeline rc=$?"; grep "^T=1" $OUT/timeline_pf.log
