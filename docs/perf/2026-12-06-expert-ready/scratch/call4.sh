# Each K step of the packed FP8 tile asks the L2 for the box AHEAD steps on (`Launch.fp8_prefetch_
# ahead`), past the 6-stage pipeline's TMA copies: more bytes in flight a program at no shared
# memory or occupancy. Both stages at 8, 12, 16 and 24 steps on, and 12 with the first 8 boxes
# before the wait (call 3's best); 16, 32 and 64 tokens, two draws, both ranks.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-"
V="$P:-:8,$P:-:12,$P:-:16,$P:-:24,$P:8:12"
BENCH_TIME_BUDGET_S=420 timeout 540 python3 tools/bench_grouped_decode.py /tmp/ah --precision w8a16 --tokens 16,32,64 \
  --seeds 0,1 --rank 0,1 --variants "$V" --variant-tokens 16,32,64 > $OUT/ahead.log 2>&1; echo "bench rc=$?"
grep -A40 "^slowest of ranks" $OUT/ahead.log | head -60
echo "rows checked: $(grep -c 'ok=True sentinels=pass' $OUT/ahead.log) pass, $(grep -c 'ok=False\|sentinels=fail' $OUT/ahead.log) fail"
