# Third call (twenty-fifth session): today's figures on the arms as they stand (the sparse GEMV's
# expert-by-expert wait taken out again): both formats' copy shares at 1, 32 and 64 tokens (two
# draws, both ranks), then the whole gated scenario. About 5 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for pr in w8a16 w4a16; do
  timeout 80 python3 tools/bench_grouped_decode.py /tmp/c_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  grep "^$pr " $OUT/copy_share_$pr.log | head -12
done
DEADLINE=$(( $(date +%s) + 250 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
