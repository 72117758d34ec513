# The expert-by-expert wait (ready 1) where it is not the default yet: the MXFP4 one-pass tile at
# 16, 32 and 64 tokens (two draws, both ranks), and FP8's looping tile at 2, 4 and 8 tokens over
# four draws (call 7 had two: 4 and 8 faster in both, 2 slower in both).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
R="dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1"
timeout 150 python3 tools/bench_grouped_decode.py /tmp/mx --precision w4a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "$R" --variant-tokens 16,32,64 > $OUT/ready_mxfp4.log 2>&1; echo "mxfp4 rc=$?"
grep -A12 "^slowest of ranks" $OUT/ready_mxfp4.log | head -12
BENCH_TIME_BUDGET_S=300 timeout 200 python3 tools/bench_grouped_decode.py /tmp/lp --precision w8a16 --tokens 2,4,8 --seeds 0,1,2,3 --rank 0,1 \
  --variants "$R" --variant-tokens 2,4,8 > $OUT/ready_loop4.log 2>&1; echo "loop rc=$?"
grep -A12 "^slowest of ranks" $OUT/ready_loop4.log | head -12
for f in $OUT/*.log; do echo "$f: $(grep -c 'ok=True sentinels=pass' $f) rows pass, $(grep -c 'ok=False\|sentinels=fail' $f) fail"; done
