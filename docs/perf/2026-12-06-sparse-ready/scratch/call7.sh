# Seventh call (twenty-fifth session): the gated scenario on FP8's one-token dependent launch
# taken up to 4 tokens (sparse_launch.FP8_PDL_LOCAL_TOKENS = 4), then the FP8 copy shares. About
# 5 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEADLINE=$(( $(date +%s) + 250 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
timeout 80 python3 tools/bench_grouped_decode.py /tmp/c8 --precision w8a16 --tokens 1,2,4 --seeds 0,1 --rank 0,1 \
  > $OUT/steps_w8a16.log 2>&1; echo "steps rc=$?"
grep "^w8a16 " $OUT/steps_w8a16.log | head -12
