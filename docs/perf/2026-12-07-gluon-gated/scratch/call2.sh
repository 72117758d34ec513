# The thirty-sixth session's second call: FP8's one-pass tile in Gluon (`fp8_gluon`, not yet the
# default) on the GPU, its tests, then timed against the Triton tile; then MXFP4's Gluon default
# against the Triton one-pass tile as the arm really launches it where Gluon cannot run (the
# thirty-fifth session's comparison took the Gluon launch with the flag off: uncapped registers,
# no K order). About 570 s:
#   CALL_END=$(( $(date +%s) + 575 )) bash docs/perf/2026-12-07-gluon-gated/scratch/call2.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 575 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -n "^FP8_GLUON\|^MX_GLUON" moebench/kernels/grouped_launch.py
env -u TRITON_INTERPRET timeout 150 python3 -m pytest -p no:cacheprovider -q -rfE -n 4 \
  tests/kernels/test_fp8_gluon.py tests/kernels/test_mx_gluon.py tests/arms/test_gluon_stage_gpu.py \
  tests/kernels/test_expert_ready.py > $OUT/gluon_tests.txt 2>&1
echo "gluon tests rc=$?"; tail -6 $OUT/gluon_tests.txt
G1="-$(printf ':-%.0s' $(seq 22)):1"
G0="-$(printf ':-%.0s' $(seq 22)):0"
R0="-:-:-:-:-:-:-:-:0$(printf ':-%.0s' $(seq 14)):1"
echo "fp8 bench with $(left) s left"
BENCH_TIME_BUDGET_S=60 timeout $(( $(left) - 150 )) python3 tools/bench_grouped_decode.py \
  /tmp/bench8 --tokens 16,32,64 --precision w8a16 --variants="$G1,$R0" --variant-tokens 16,32,64 \
  --seeds 0,1 --rank 0,1 > $OUT/bench_fp8.log 2>&1
echo "fp8 bench rc=$?"; grep -A14 "slowest of ranks" $OUT/bench_fp8.log
echo "mxfp4 bench with $(left) s left"
if [ $(left) -gt 60 ]; then
  BENCH_TIME_BUDGET_S=60 timeout $(( $(left) - 15 )) python3 tools/bench_grouped_decode.py \
    /tmp/bench4 --tokens 32,64 --precision w4a16 --variants="$G0" --variant-tokens 32,64 \
    --seeds 0,1 --rank 0,1 > $OUT/bench_mxfp4.log 2>&1
  echo "mxfp4 bench rc=$?"; grep -A10 "slowest of ranks" $OUT/bench_mxfp4.log
fi
echo "done with $(left) s left"
