# The thirty-sixth session's second call: FP8's one-pass tile in Gluon (`fp8_gluon`, not yet the
# default) on the GPU, its tests, then timed against the Triton tile; then MXFP4's Gluon default
# against the Triton one-pass tile as the arm really launches it where Gluon cannot run (the
# thirty-fifth session's comparison took the Gluon launch with the flag off: uncapped registers,
# no K order). About 380 s:
#   CALL_END=$(( $(date +%s) + 380 )) bash docs/perf/2026-12-07-gluon-gated/scratch/call2.sh
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
echo "fp8 bench with $(left) s left"
BENCH_TIME_BUDGET_S=60 timeout 200 python3 tools/bench_grouped_decode.py \
  /tmp/bench8 --tokens 16,32,64 --precision w8a16 --variants="$G1" --variant-tokens 16,32,64 \
  --seeds 0,1 --rank 0,1 > $OUT/bench_fp8.log 2>&1
echo "fp8 bench rc=$?"; grep -A14 "slowest of ranks" $OUT/bench_fp8.log
# FP8's cases of the gated scenario with the FP8 Gluon tile switched on for this run only (the
# run's manifest then says the tree was dirty).
if [ $(left) -gt 80 ]; then
  sed -i 's/^FP8_GLUON = False/FP8_GLUON = True/' moebench/kernels/grouped_launch.py
  grep -n "^FP8_GLUON =" moebench/kernels/grouped_launch.py
  RUN=$(( $(left) - 60 ))
  DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g8 \
    docs/perf/2026-12-07-gluon-gated/scratch/gpt-oss-20b-decode-grouped-fp8.yaml > $OUT/gpu_run_fp8.log 2>&1
  echo "gated fp8 rc=$?"; tail -2 $OUT/gpu_run_fp8.log
  mkdir -p /tmp/gx8 && tar -xzf /tmp/g8/gpu_run.tgz -C /tmp/gx8
  cp /tmp/g8/summary.txt $OUT/summary_fp8.txt
  cp /tmp/gx8/logs/gpt-oss-20b-decode-grouped-fp8.md $OUT/report_fp8.md 2>/dev/null
  python3 - <<'PY' > $OUT/checks_count_fp8.txt 2>&1
import collections, glob, pyarrow.parquet as pq
runs = sorted(glob.glob('/tmp/gx8/results/*/'))
c = collections.Counter()
for f in sorted(glob.glob(runs[-1] + 'checks/*.parquet')):
    t = pq.read_table(f).to_pydict()
    c.update(t['status'])
    for i, s in enumerate(t['status']):
        if s == 'fail':
            print('FAIL', {k: t[k][i] for k in t})
print('checks of run', runs[-1].split('/')[-2], 'by status:', dict(c))
PY
  tail -3 $OUT/checks_count_fp8.txt
fi
echo "mxfp4 bench with $(left) s left"
if [ $(left) -gt 40 ]; then
  BENCH_TIME_BUDGET_S=60 timeout $(( $(left) - 5 )) python3 tools/bench_grouped_decode.py \
    /tmp/bench4 --tokens 32,64 --precision w4a16 --variants="$G0" --variant-tokens 32,64 \
    --seeds 0,1 --rank 0,1 > $OUT/bench_mxfp4.log 2>&1
  echo "mxfp4 bench rc=$?"; grep -A10 "slowest of ranks" $OUT/bench_mxfp4.log
fi
echo "done with $(left) s left"
echo "end with $(left) s left"
