# The thirty-fifth session's third call: the gated scenario's MXFP4 cases at 32 and 64 tokens (the
# second call's deadline cut them) with the Gluon tile the default, and the GPU tests the second
# call failed (the stage test's launch compared with the K order kept; the expert-ready test
# given the Gluon layout's weights): About 180 s:
#   CALL_END=$(( $(date +%s) + 190 )) bash docs/perf/2026-12-07-ws-readonly/scratch/call3.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
D=docs/perf/2026-12-07-ws-readonly/scratch
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
env -u TRITON_INTERPRET timeout 60 python3 -m pytest -p no:cacheprovider -q -rfE -n 4 \
  tests/arms/test_gluon_stage_gpu.py tests/kernels/test_expert_ready.py tests/kernels/test_mx_gluon.py \
  > $OUT/gpu_tests.txt 2>&1
echo "tests rc=$?"; tail -4 $OUT/gpu_tests.txt
DEADLINE=$(( $(date +%s) + 115 )) PER_RUN_TIMEOUT=110 bash tools/gpu_run.sh /tmp/g \
  $D/gpt-oss-20b-decode-grouped-mxfp4.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log
mkdir -p /tmp/gx && tar -xzf /tmp/g/gpu_run.tgz -C /tmp/gx
cp /tmp/g/summary.txt $OUT/
cp /tmp/gx/logs/gpt-oss-20b-decode-grouped-mxfp4.md $OUT/report.md 2>/dev/null
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
grep "| ffn |" $OUT/report.md | grep "%" | tail -6
