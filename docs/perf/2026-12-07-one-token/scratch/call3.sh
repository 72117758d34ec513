# The thirty-eighth session's third call, with GEMV_SLOT_GRID the default (taken after call 1):
# the GPU test call 1 failed (a test bug: the e4m3 test kept the NaN bytes for the slot grid's
# GEMV), fixed; the one- and two-token steps and their read floors on this card (call 2's bench,
# four draws, as call 1); then the whole gated scenario on the slot-grid default, with what time
# is left. About CALL_END - now:
#   CALL_END=$(( $(date +%s) + 520 )) bash docs/perf/2026-12-07-one-token/scratch/call3.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 520 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -n "^FP8_GLUON =\|^MX_GLUON =\|^GEMV_SLOT_GRID =" moebench/kernels/grouped_launch.py
env -u TRITON_INTERPRET timeout 100 python3 -m pytest -p no:cacheprovider -q -rfE -n 8 \
  tests/kernels/test_grouped_decode.py -k "e4m3_byte or slot_grid" > $OUT/tests.txt 2>&1
echo "tests rc=$?"; tail -3 $OUT/tests.txt
echo "floor bench with $(left) s left"
BENCH_TIME_BUDGET_S=60 timeout 200 python3 tools/bench_grouped_decode.py /tmp/floor \
  --tokens 1,2 --floor 1,2 --variants="-:-:-:-:-" --variant-tokens 64 --seeds 0,1,2,3 \
  --rank 0,1 > $OUT/floor.log 2>&1
echo "floor rc=$?"; grep -A40 "slowest of ranks" $OUT/floor.log
RUN=$(( $(left) - 15 ))
if [ $RUN -lt 200 ]; then echo "no gated run: $RUN s left"; exit 0; fi
echo "gated run of $RUN s"
DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g \
  scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log
mkdir -p /tmp/gx && tar -xzf /tmp/g/gpu_run.tgz -C /tmp/gx
cp /tmp/g/summary.txt $OUT/
cp /tmp/gx/logs/gpt-oss-20b-decode-grouped.md $OUT/report.md 2>/dev/null
python3 tools/count_checks.py /tmp/gx/results > $OUT/checks_count.txt 2>&1
tail -3 $OUT/checks_count.txt
echo "end with $(left) s left"
