# The thirty-fifth session's first call: the arm's new Gluon tile (moebench/kernels/mx_gluon.py,
# ``Launch.mx_gluon``, off by default) checked on the GPU and timed against the arm's Triton tile,
# then the thirty-fourth session's prepared probe call (read-only stream, 64 registers, paired
# stages, Nsight Compute). About 400 s:
#   CALL_END=$(( $(date +%s) + 570 )) bash docs/perf/2026-12-07-ws-readonly/scratch/call1.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 570 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
env -u TRITON_INTERPRET timeout 170 python3 -m pytest -p no:cacheprovider -q -rfE -n 4 \
  tests/kernels/test_mx_gluon.py tests/arms/test_gluon_stage_gpu.py > $OUT/gluon_tests.txt 2>&1
echo "gluon tests rc=$?"; tail -15 $OUT/gluon_tests.txt
G="-$(printf ':-%.0s' $(seq 22)):1"
BENCH_TIME_BUDGET_S=140 timeout 200 python3 tools/bench_grouped_decode.py /tmp/bench \
  --tokens 16,32,64 --precision w4a16 --variants="$G" --variant-tokens 16,32,64 \
  --seeds 0,1 --rank 0,1 > $OUT/bench.log 2>&1
echo "bench rc=$?"; tail -40 $OUT/bench.log
tar -czf $OUT/bench.tgz -C /tmp bench 2>/dev/null
echo "probe call with $(left) s left"
if [ $(left) -gt 140 ]; then
  bash docs/perf/2026-12-07-ws-gluon/scratch/next_call.sh
fi
