# call1.sh cut to its tests and benches (no gated run), for a start with less device time left:
# the GPU tests of the slot grid, the expert-ready graph test and the layout copies' byte count,
# then the slot grid timed against the arm's GEMV at one token (FP8) and one and two (MXFP4).
# About 300 s:
#   CALL_END=$(( $(date +%s) + 300 )) bash docs/perf/2026-12-07-one-token/scratch/call1_short.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 300 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -n "^FP8_GLUON =\|^MX_GLUON =\|^GEMV_SLOT_GRID =" moebench/kernels/grouped_launch.py
env -u TRITON_INTERPRET timeout 150 python3 -m pytest -p no:cacheprovider -q -rfE -n 8 \
  tests/kernels/test_expert_ready.py tests/kernels/test_grouped_decode.py \
  tests/kernels/test_grouped_launch_choice.py tests/arms/test_layout_bytes.py \
  > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -4 $OUT/tests.txt
# Fields: 9 registers, 11 early bias, 25 slots (tools/bench_grouped_decode.py).
S="-$(printf ':-%.0s' $(seq 23)):1"
S64="-:-:-:-:-:-:-:-:64$(printf ':-%.0s' $(seq 15)):1"
S64E="-:-:-:-:-:-:-:-:64:-:1$(printf ':-%.0s' $(seq 13)):1"
SE="-:-:-:-:-:-:-:-:-:-:1$(printf ':-%.0s' $(seq 13)):1"
E="-:-:-:-:-:-:-:-:-:-:1"
echo "fp8 bench with $(left) s left"
BENCH_TIME_BUDGET_S=70 timeout 110 python3 tools/bench_grouped_decode.py /tmp/bench8 \
  --tokens 1 --precision w8a16 --variants="$S,$S64,$S64E,$E" --variant-tokens 1 \
  --seeds 0,1,2,3 --rank 0,1 > $OUT/bench_fp8.log 2>&1
echo "fp8 bench rc=$?"; grep -A14 "slowest of ranks" $OUT/bench_fp8.log
echo "mxfp4 bench with $(left) s left"
BENCH_TIME_BUDGET_S=70 timeout 110 python3 tools/bench_grouped_decode.py /tmp/bench4 \
  --tokens 1,2 --precision w4a16 --variants="$S,$SE,$E" --variant-tokens 1,2 \
  --seeds 0,1,2,3 --rank 0,1 > $OUT/bench_mxfp4.log 2>&1
echo "mxfp4 bench rc=$?"; grep -A20 "slowest of ranks" $OUT/bench_mxfp4.log
echo "end with $(left) s left"
