# fc2's first boxes asked of the L2 before its dependent-launch wait (`Launch.fp8_prefetch`),
# while fc1's second wave still streams: fc2 only at 4, 8, 16 and 45 boxes (45: a program's whole
# stream), fc1 only at 8, both at 8; 16, 32 and 64 tokens, two draws, both ranks.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
V="dot:-:-:-:-:-:-:-:-:-:-:2:-:-:-:-:4,dot:-:-:-:-:-:-:-:-:-:-:2:-:-:-:-:8,dot:-:-:-:-:-:-:-:-:-:-:2:-:-:-:-:16,dot:-:-:-:-:-:-:-:-:-:-:2:-:-:-:-:45,dot:-:-:-:-:-:-:-:-:-:-:1:-:-:-:-:8,dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:8"
BENCH_TIME_BUDGET_S=420 timeout 540 python3 tools/bench_grouped_decode.py /tmp/pf --precision w8a16 --tokens 16,32,64 \
  --seeds 0,1 --rank 0,1 --variants "$V" --variant-tokens 16,32,64 > $OUT/prefetch.log 2>&1; echo "bench rc=$?"
grep -A40 "^slowest of ranks" $OUT/prefetch.log | head -60
grep -c "ok=True sentinels=pass" $OUT/prefetch.log; grep -c "ok=False\|sentinels=fail" $OUT/prefetch.log
