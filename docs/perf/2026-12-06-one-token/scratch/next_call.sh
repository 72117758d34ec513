# Prepared for the next session (not run in this one): on an H200 where one is lent, else on what
# comes. Both formats' copy shares at 1, 32 and 64 tokens (two draws, both ranks), which judge
# issue 28's targets where they are set; the one-token FP8 step program by program
# (gemv_timeline.py), to compare its edges with the H100's (call2); then the whole gated scenario
# on the arms as they stand. About 6 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for pr in w8a16 w4a16; do
  timeout 80 python3 tools/bench_grouped_decode.py /tmp/c_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  grep "^$pr " $OUT/copy_share_$pr.log | head -12
done
timeout 120 python3 docs/perf/2026-12-06-one-token/scratch/gemv_timeline.py --tokens 1 --seeds 0,1,2,3 --rank 0,1 > $OUT/timeline.log 2>&1
echo "timeline rc=$?"; grep -A3 "^T=1 seed=0 rank=0" $OUT/timeline.log | cut -c1-300
DEADLINE=$(( $(date +%s) + 250 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
