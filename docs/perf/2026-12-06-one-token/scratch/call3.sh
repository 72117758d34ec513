# Third call: MXFP4's looping tile (4 and 8 tokens) waiting expert by expert as the default now
# (grouped_launch.EXPERT_READY_FROM_SLOTS_PER_EXPERT), the whole-grid wait its variant, on two
# new draws (seeds 2, 3), both ranks; the GPU test of the wait under graph replays (FP8 one pass,
# MXFP4 one pass and its expert loop); then the whole gated scenario on this tree. About 5 min.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_expert_ready.py > $OUT/gpu_expert_ready_tests.txt 2>&1
echo "gpu tests rc=$?"; tail -3 $OUT/gpu_expert_ready_tests.txt
timeout 90 python3 tools/bench_grouped_decode.py /tmp/mxl --precision w4a16 --tokens 4,8 --seeds 2,3 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:0" --variant-tokens 4,8 > $OUT/whole_mxfp4_loop.log 2>&1; echo "mx loop rc=$?"
grep -A8 "^slowest of ranks" $OUT/whole_mxfp4_loop.log | head -8
DEADLINE=$(( $(date +%s) + 250 )) PER_RUN_TIMEOUT=240 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
