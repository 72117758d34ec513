# Prepared for the next session (not run): with both Gluon tiles the one-pass defaults, the GPU
# tests this session fixed (the expert-ready graph test with FP8's Gluon switch), the whole gated
# scenario (on an H200 above all: no H200 was lent this session), each format's Gluon tile against
# the Triton tile the arm falls back to (gluon 0) at 16-64 tokens, the one- and two-token steps
# without the dependent launch (pdl 0: at one and two tokens the sparse arm, FP8 without it, beat
# the grouped arm's GEMV on both cards), then every GPU-marked test in what time is left. About
# 570 s:
#   CALL_END=$(( $(date +%s) + 575 )) bash docs/perf/2026-12-07-gluon-gated/scratch/next_call.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 575 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
grep -n "^FP8_GLUON =\|^MX_GLUON =" moebench/kernels/grouped_launch.py
env -u TRITON_INTERPRET timeout 90 python3 -m pytest -p no:cacheprovider -q -rfE -n 4 \
  tests/kernels/test_expert_ready.py tests/kernels/test_fp8_gluon.py > $OUT/gluon_tests.txt 2>&1
echo "tests rc=$?"; tail -4 $OUT/gluon_tests.txt
RUN=270
DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=$(( RUN - 5 )) bash tools/gpu_run.sh /tmp/g \
  scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -2 $OUT/gpu_run.log
mkdir -p /tmp/gx && tar -xzf /tmp/g/gpu_run.tgz -C /tmp/gx
cp /tmp/g/summary.txt $OUT/
cp /tmp/gx/logs/gpt-oss-20b-decode-grouped.md $OUT/report.md 2>/dev/null
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
G0="-$(printf ':-%.0s' $(seq 22)):0"
P0="-:-:-:-:-:-:0"
if [ $(left) -gt 150 ]; then
  BENCH_TIME_BUDGET_S=60 timeout 100 python3 tools/bench_grouped_decode.py /tmp/bench \
    --tokens 1,2,16,32,64 --variants="$G0,$P0" --variant-tokens 1,2,16,32,64 --seeds 0,1 \
    --rank 0,1 > $OUT/bench.log 2>&1
  echo "bench rc=$?"; grep -A40 "slowest of ranks" $OUT/bench.log
fi
echo "GPU tests with $(left) s left"
if [ $(left) -gt 40 ]; then
  env -u TRITON_INTERPRET timeout $(( $(left) - 10 )) python3 -m pytest -p no:cacheprovider -m gpu \
    tests -n 8 -q -rfE > $OUT/test_gpu.txt 2>&1
  echo "tests rc=$?"; tail -6 $OUT/test_gpu.txt
fi
