# The thirty-third session's second call (issue 28 and the H100's ceilings): the ceilings
# moebench draws floors against, measured on the card lent (tools/measure_ceilings.py), then every
# GPU-marked test compiled on it, 8 workers, for what is left of the call. About 560 s:
#   CALL_END=$(( $(date +%s) + 560 )) bash docs/perf/2026-12-07-h100-ceilings/scratch/call1.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 560 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader
timeout 150 python3 tools/measure_ceilings.py $OUT/ceilings.json --repeats 5 > $OUT/ceilings.log 2>&1
echo "ceilings rc=$?"; cat $OUT/ceilings.log
T=$(( $(left) - 10 ))
echo "GPU tests: ${T} s"
env -u TRITON_INTERPRET timeout $T python3 -m pytest -p no:cacheprovider -m gpu tests -n 8 -q \
  -rfE > $OUT/test_gpu.txt 2>&1
echo "tests rc=$?"; tail -25 $OUT/test_gpu.txt
