# The thirty-fifth session's second call, with the Gluon tile the MXFP4 one-pass default
# (grouped_launch.MX_GLUON on): its GPU tests (the layout's steps now at least 4), the gated
# scenario, the bench against the Triton tile (gluon field 0), then every GPU-marked test in
# what time is left. About 560 s:
#   CALL_END=$(( $(date +%s) + 575 )) bash docs/perf/2026-12-07-ws-readonly/scratch/call2.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 575 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -n "^MX_GLUON" moebench/kernels/grouped_launch.py
env -u TRITON_INTERPRET timeout 120 python3 -m pytest -p no:cacheprovider -q -rfE -n 4 \
  tests/kernels/test_mx_gluon.py tests/arms/test_gluon_stage_gpu.py > $OUT/gluon_tests.txt 2>&1
echo "gluon tests rc=$?"; tail -4 $OUT/gluon_tests.txt
RUN=230
DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g \
  scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -3 $OUT/gpu_run.log
mkdir -p /tmp/gx && tar -xzf /tmp/g/gpu_run.tgz -C /tmp/gx
cp /tmp/g/summary.txt $OUT/
cp /tmp/gx/logs/gpt-oss-20b-decode-grouped.md $OUT/report.md 2>/dev/null
tail -40 /tmp/gx/logs/gpt-oss-20b-decode-grouped.run.txt >> $OUT/gpu_run.log 2>/dev/null
python3 - <<'PY' > $OUT/checks_count.txt 2>&1
import collections, glob, pyarrow.parquet as pq
runs = sorted(glob.glob('/tmp/gx/results/*/'))
c = collections.Counter()
for f in sorted(glob.glob(runs[-1] + 'checks/*.parquet')):
    t = pq.read_table(f).to_pydict()
    c.update(t['status'])
    for i, s in enumerate(t['status']):
        if s == 'fail':
            print('FAIL', {k: t[k][i] for k in t})
print('checks of run', runs[-1].split('/')[-2], 'by status:', dict(c))
PY
tail -3 $OUT/checks_count.txt
grep -i "grouped" $OUT/report.md | head -20
echo "bench with $(left) s left"
G="-$(printf ':-%.0s' $(seq 22)):0"
if [ $(left) -gt 200 ]; then
  BENCH_TIME_BUDGET_S=90 timeout $(( $(left) - 140 )) python3 tools/bench_grouped_decode.py \
    /tmp/bench --tokens 32,64 --precision w4a16 --variants="$G" --variant-tokens 32,64 \
    --seeds 0,1 --rank 0,1 > $OUT/bench.log 2>&1
  echo "bench rc=$?"; tail -30 $OUT/bench.log
  tar -czf $OUT/bench.tgz -C /tmp bench 2>/dev/null
fi
echo "GPU tests with $(left) s left"
if [ $(left) -gt 40 ]; then
  env -u TRITON_INTERPRET timeout $(( $(left) - 10 )) python3 -m pytest -p no:cacheprovider -m gpu \
    tests -n 8 -q -rfE > $OUT/test_gpu.txt 2>&1
  echo "tests rc=$?"; tail -8 $OUT/test_gpu.txt
fi
