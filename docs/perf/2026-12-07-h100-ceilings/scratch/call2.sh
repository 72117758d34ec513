# The thirty-third session's third call: every GPU-marked test again (the expert-by-expert wait's
# MXFP4 test now reads its scales as the arm builds them, `tiles_scales`), then the gated scenario
# with the H100 SXM's own ceilings in moebench.core.ceilings (its physical floors and 'of copy'
# against 2.97 TB/s, no longer the H200's bound). About 420 s:
#   CALL_END=$(( $(date +%s) + 420 )) bash docs/perf/2026-12-07-h100-ceilings/scratch/call2.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 420 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
env -u TRITON_INTERPRET timeout 170 python3 -m pytest -p no:cacheprovider -m gpu tests -n 8 -q \
  -rfE > $OUT/test_gpu.txt 2>&1
echo "tests rc=$?"; tail -6 $OUT/test_gpu.txt
if [ $(left) -gt 200 ]; then
  RUN=$(( $(left) - 20 ))
  DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g \
    scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
  echo "gated rc=$?"; tail -3 $OUT/gpu_run.log
  cp /tmp/g/summary.txt $OUT/
  cp /tmp/g/logs/gpt-oss-20b-decode-grouped.md $OUT/report.md 2>/dev/null
  tail -60 /tmp/g/logs/gpt-oss-20b-decode-grouped.run.txt > $OUT/run_tail.txt 2>/dev/null
  python3 - <<'PY' > $OUT/checks_count.txt 2>&1
import collections, glob, pyarrow.parquet as pq
runs = sorted(glob.glob('/tmp/g/results/*/'))
c = collections.Counter()
for f in sorted(glob.glob(runs[-1] + 'checks/*.parquet')):
    t = pq.read_table(f).to_pydict()
    c.update(t['status'])
    for i, s in enumerate(t['status']):
        if s == 'fail':
            print('FAIL', {k: t[k][i] for k in t})
print('checks of run', runs[-1].split('/')[-2], 'by status:', dict(c))
PY
  cat $OUT/checks_count.txt | tail -3
else
  echo "gated: $(left) s left in this call, not run"
fi
