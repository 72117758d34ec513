# Prepared for the next session (not run in this one): on an H200 where one is lent, else on what
# comes. Both formats' copy shares at 1, 32 and 64 tokens (two draws, both ranks), which judge
# issue 28's targets where they are set; the one-token FP8 step beside its read floor (four
# draws, both ranks); then the whole gated scenario on the arms as they stand (FP8's dependent
# launch up to 4 tokens). About 6 minutes; PER_RUN_TIMEOUT leaves the gated run 260 s, as an H100
# took 212 s for its steps in this session's seventh call.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for pr in w8a16 w4a16; do
  timeout 80 python3 tools/bench_grouped_decode.py /tmp/c_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  grep "^$pr " $OUT/copy_share_$pr.log | head -12
done
timeout 60 python3 tools/bench_grouped_decode.py /tmp/f8 --precision w8a16 --tokens 1 --floor 1 --seeds 0,1,2,3 --rank 0,1 \
  > $OUT/read_floor_w8a16.log 2>&1; echo "floor rc=$?"
DEADLINE=$(( $(date +%s) + 290 )) PER_RUN_TIMEOUT=260 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
