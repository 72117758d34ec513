# Prepared for the next session (not run in this one; its device time was spent): on an H200 where
# one is lent, else on what comes. The expert-by-expert wait under CUDA-graph replays on the GPU
# (tests/kernels/test_expert_ready.py compiled), both formats' copy shares at 1, 32 and 64 tokens
# (two draws, both ranks), MXFP4's looping tile (4 and 8 tokens) with the wait as a variant, then
# the whole gated scenario. About 7 minutes.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_expert_ready.py > $OUT/gpu_expert_ready_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -2 $OUT/gpu_expert_ready_tests.txt
for pr in w8a16 w4a16; do
  timeout 80 python3 tools/bench_grouped_decode.py /tmp/c_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  grep "^$pr " $OUT/copy_share_$pr.log | head -12
done
timeout 70 python3 tools/bench_grouped_decode.py /tmp/mxl --precision w4a16 --tokens 4,8 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1" --variant-tokens 4,8 > $OUT/ready_mxfp4_loop.log 2>&1; echo "mx loop rc=$?"
grep -A8 "^slowest of ranks" $OUT/ready_mxfp4_loop.log | head -8
DEADLINE=$(( $(date +%s) + 250 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
