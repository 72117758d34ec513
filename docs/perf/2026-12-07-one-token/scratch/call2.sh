# The thirty-seventh session's second call: the one-slot GEMV's grid led by slots
# (`Launch.slot_grid`, `grouped_slots.slot_expert`; off by default) on the GPU: its tests, then
# timed against the arm's GEMV (led by touched experts) at one token (FP8) and one and two
# (MXFP4), with the early bias beside it, then the gated scenario's one- and two-token cases with
# GEMV_SLOT_GRID switched on for the run only (the run's manifest then says the tree was dirty).
# About 480 s:
#   CALL_END=$(( $(date +%s) + 480 )) bash docs/perf/2026-12-07-one-token/scratch/call2.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 480 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -n "^GEMV_SLOT_GRID" moebench/kernels/grouped_launch.py
env -u TRITON_INTERPRET timeout 150 python3 -m pytest -p no:cacheprovider -q -rfE -n 8 \
  tests/kernels/test_grouped_decode.py tests/kernels/test_grouped_launch_choice.py \
  > $OUT/slot_tests.txt 2>&1
echo "tests rc=$?"; tail -4 $OUT/slot_tests.txt
# Fields: 9 registers, 11 early bias, 25 slots (tools/bench_grouped_decode.py).
S="-$(printf ':-%.0s' $(seq 23)):1"
S64="-:-:-:-:-:-:-:-:64$(printf ':-%.0s' $(seq 15)):1"
S64E="-:-:-:-:-:-:-:-:64:-:1$(printf ':-%.0s' $(seq 13)):1"
SE="-:-:-:-:-:-:-:-:-:-:1$(printf ':-%.0s' $(seq 13)):1"
E="-:-:-:-:-:-:-:-:-:-:1"
echo "fp8 bench with $(left) s left"
BENCH_TIME_BUDGET_S=80 timeout 150 python3 tools/bench_grouped_decode.py /tmp/bench8 \
  --tokens 1 --precision w8a16 --variants="$S,$S64,$S64E,$E" --variant-tokens 1 \
  --seeds 0,1,2,3 --rank 0,1 > $OUT/bench_fp8.log 2>&1
echo "fp8 bench rc=$?"; grep -A14 "slowest of ranks" $OUT/bench_fp8.log
echo "mxfp4 bench with $(left) s left"
BENCH_TIME_BUDGET_S=80 timeout 150 python3 tools/bench_grouped_decode.py /tmp/bench4 \
  --tokens 1,2 --precision w4a16 --variants="$S,$SE,$E" --variant-tokens 1,2 \
  --seeds 0,1,2,3 --rank 0,1 > $OUT/bench_mxfp4.log 2>&1
echo "mxfp4 bench rc=$?"; grep -A20 "slowest of ranks" $OUT/bench_mxfp4.log
if [ $(left) -gt 90 ]; then
  sed -i 's/^GEMV_SLOT_GRID = False/GEMV_SLOT_GRID = True/' moebench/kernels/grouped_launch.py
  grep -n "^GEMV_SLOT_GRID =" moebench/kernels/grouped_launch.py
  RUN=$(( $(left) - 20 ))
  DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/gf \
    docs/perf/2026-12-07-one-token/scratch/gpt-oss-20b-decode-grouped-few.yaml > $OUT/gpu_run_few.log 2>&1
  echo "gated few rc=$?"; tail -2 $OUT/gpu_run_few.log
  mkdir -p /tmp/gxf && tar -xzf /tmp/gf/gpu_run.tgz -C /tmp/gxf
  cp /tmp/gf/summary.txt $OUT/summary_few.txt
  cp /tmp/gxf/logs/gpt-oss-20b-decode-grouped-few.md $OUT/report_few.md 2>/dev/null
  python3 - <<'PY' > $OUT/checks_count_few.txt 2>&1
import collections, glob, pyarrow.parquet as pq
runs = sorted(glob.glob('/tmp/gxf/results/*/'))
c = collections.Counter()
for f in sorted(glob.glob(runs[-1] + 'checks/*.parquet')):
    t = pq.read_table(f).to_pydict()
    c.update(t['status'])
    for i, s in enumerate(t['status']):
        if s == 'fail':
            print('FAIL', {k: t[k][i] for k in t})
print('checks of run', runs[-1].split('/')[-2], 'by status:', dict(c))
PY
  tail -3 $OUT/checks_count_few.txt
fi
echo "end with $(left) s left"
