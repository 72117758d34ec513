# The thirty-fifth session's second call: with the Gluon tile as the MXFP4 one-pass default
# (grouped_launch.MX_GLUON on), the gated scenario and every GPU-marked test. About 360 s:
#   CALL_END=$(( $(date +%s) + 570 )) bash docs/perf/2026-12-07-ws-readonly/scratch/call2.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 570 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -n "^MX_GLUON" moebench/kernels/grouped_launch.py
RUN=$(( $(left) - 200 ))
[ $RUN -gt 260 ] && RUN=260
DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g \
  scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -3 $OUT/gpu_run.log
mkdir -p /tmp/gx && tar -xzf /tmp/g/gpu_run.tgz -C /tmp/gx
cp /tmp/g/summary.txt $OUT/
cp /tmp/gx/logs/gpt-oss-20b-decode-grouped.md $OUT/report.md 2>/dev/null
tail -60 /tmp/gx/logs/gpt-oss-20b-decode-grouped.run.txt > $OUT/run_tail.txt 2>/dev/null
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
echo "GPU tests with $(left) s left"
if [ $(left) -gt 60 ]; then
  env -u TRITON_INTERPRET timeout $(( $(left) - 15 )) python3 -m pytest -p no:cacheprovider -m gpu \
    tests -n 8 -q -rfE > $OUT/test_gpu.txt 2>&1
  echo "tests rc=$?"; tail -8 $OUT/test_gpu.txt
fi
