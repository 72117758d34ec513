# The thirty-fifth session's last call (in place of call3.sh, for the device time left): the GPU
# tests the second call failed (fixed since), then the Gluon tile on 4 stages and capped at 96
# registers (5 programs an SM; sm_90a offline: 89 registers, its wgmmas serialised by ptxas)
# against its default (3 stages, 127 registers, 4 an SM), MXFP4 at 32 and 64 tokens, draw 0, both
# ranks. About 170 s:
#   CALL_END=$(( $(date +%s) + 190 )) bash docs/perf/2026-12-07-ws-readonly/scratch/call4.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 190 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
env -u TRITON_INTERPRET timeout 60 python3 -m pytest -p no:cacheprovider -q -rfE -n 4 \
  tests/arms/test_gluon_stage_gpu.py tests/kernels/test_expert_ready.py tests/kernels/test_mx_gluon.py \
  > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -4 $OUT/gpu_tests.txt
S4="-:-:-:-:-:4$(printf ':-%.0s' $(seq 17)):1"
R96="-:-:-:-:-:-:-:-:96$(printf ':-%.0s' $(seq 14)):1"
BENCH_TIME_BUDGET_S=50 timeout $(( $(left) - 8 )) python3 tools/bench_grouped_decode.py /tmp/bench \
  --tokens 32,64 --precision w4a16 --variants="$S4,$R96" --variant-tokens 32,64 --seeds 0 \
  --rank 0,1 > $OUT/bench.log 2>&1
echo "bench rc=$?"; grep -A12 "slowest of ranks" $OUT/bench.log
