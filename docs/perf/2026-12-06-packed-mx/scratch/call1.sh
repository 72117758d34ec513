# The MXFP4 tile's bytes packed box by box (`Launch.mx_packed`, `tile_packed` with a ragged last
# box): a program's 22.5 boxes of [64 rows, 64 bytes] one contiguous run instead of 64 pieces
# 1,440 bytes apart a step (the FP8 tile took the same packing in the twenty-second session,
# 5-6% faster). First the arm's launch against packed (4 and 5 stages) at 16, 32 and 64 tokens,
# two draws, both ranks; then the Gluon probe (twenty-sixth session) natural, tiled, tiled with
# its loads a step further ahead, and natural ahead.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=docs/perf/2026-12-06-packed-mx/scratch
BENCH_TIME_BUDGET_S=170 timeout 260 python3 tools/bench_grouped_decode.py /tmp/pk --precision w4a16 \
  --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:1,dot:-:-:-:-:5:-:-:-:-:-:-:-:-:1" \
  --variant-tokens 16,32,64 > $OUT/mx_packed.log 2>&1
echo "bench rc=$?"; grep -v "^precision=" $OUT/mx_packed.log | tail -45
cp -r /tmp/pk $OUT/pk; ls /tmp/pk
PYTHONPATH=$PYTHONPATH:$PWD/$D timeout 200 python3 $D/probe_bench.py --tokens 32,64 --seeds 0,1 \
  --rank 0 --variants 3:1:0,3:1:0:0:0:1,3:1:0:0:0:1:1,3:1:0:0:0:0:1 > $OUT/probe_tiled.log 2>&1
echo "probe rc=$?"
grep "fc1+fc2\|error\|failed\|False" $OUT/probe_tiled.log | tail -40
