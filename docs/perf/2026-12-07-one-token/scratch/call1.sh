# The thirty-seventh session's call, prepared and not run (no machine came): the thirty-sixth
# session's next_call.sh and the slot grid's call in one. The GPU tests the thirty-sixth session
# fixed or left unrun (the expert-ready graph test with FP8's Gluon switch, the layout copies' byte
# count on the GPU) and the one-slot GEMV's slot grid (`Launch.slot_grid`, off by default); the
# slot grid timed against the arm's GEMV at one token (FP8) and one and two (MXFP4), with the early
# bias and FP8's 64-register cap beside it; then the whole gated scenario with both Gluon defaults
# and GEMV_SLOT_GRID switched on for the run only (its one- and two-token cases gate the slot
# grid; the run's manifest then says the tree was dirty). About 575 s:
#   CALL_END=$(( $(date +%s) + 575 )) bash docs/perf/2026-12-07-one-token/scratch/call1.sh
# With less device time: GATED=few (about 420 s) gates only the one- and two-token cases
# (`gpt-oss-20b-decode-grouped-few.yaml`, the cases the one-slot GEMV runs), GATED=none (about
# 300 s) runs the tests and benches only.
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 575 ))}
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
GATED=${GATED:-whole}
if [ "$GATED" = none ]; then echo "end with $(left) s left"; exit 0; fi
SCENARIO=scenarios/gpt-oss-20b-decode-grouped.yaml
[ "$GATED" = few ] && SCENARIO=docs/perf/2026-12-07-one-token/scratch/gpt-oss-20b-decode-grouped-few.yaml
NAME=$(basename $SCENARIO .yaml)
sed -i 's/^GEMV_SLOT_GRID = False/GEMV_SLOT_GRID = True/' moebench/kernels/grouped_launch.py
grep -n "^GEMV_SLOT_GRID =" moebench/kernels/grouped_launch.py
RUN=$(( $(left) - 15 ))
echo "gated run of $RUN s"
DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g \
  $SCENARIO > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log
mkdir -p /tmp/gx && tar -xzf /tmp/g/gpu_run.tgz -C /tmp/gx
cp /tmp/g/summary.txt $OUT/
cp /tmp/gx/logs/$NAME.md $OUT/report.md 2>/dev/null
python3 tools/count_checks.py /tmp/gx/results > $OUT/checks_count.txt 2>&1
tail -3 $OUT/checks_count.txt
echo "end with $(left) s left"
