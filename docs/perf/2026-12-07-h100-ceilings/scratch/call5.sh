# The thirty-third session's sixth call: the H100 SXM's own ceilings under the other regimes'
# gates: prefill layers (v4-flash-ep8: its physical floors now at 2.97 TB/s less 50 MiB, the
# tightest the H100 has had), a full buffer, the activation microbenchmark and a whole model (its
# TPOT floor now reported on this card). About 280 s:
#   CALL_END=$(( $(date +%s) + 280 )) bash docs/perf/2026-12-07-h100-ceilings/scratch/call5.sh
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 280 ))}
RUN=$(( CALL_END - $(date +%s) - 25 ))
DEADLINE=$(( $(date +%s) + RUN )) PER_RUN_TIMEOUT=150 bash tools/gpu_run.sh /tmp/g \
  scenarios/v4-flash-ep8.yaml scenarios/full-buffer.yaml scenarios/seed-act-microbench.yaml \
  scenarios/smoke-model.yaml > $OUT/gpu_run.log 2>&1
echo "runs rc=$?"; cat /tmp/g/summary.txt; cp /tmp/g/summary.txt /tmp/g/gpu_run.tgz $OUT/
mkdir -p /tmp/x && tar xzf /tmp/g/gpu_run.tgz -C /tmp/x
python3 - <<'PY' | tee $OUT/checks_count.txt
import collections, glob, pyarrow.parquet as pq
for run in sorted(glob.glob('/tmp/x/results/*/')):
    c = collections.Counter()
    for f in glob.glob(run + 'checks/*.parquet'):
        t = pq.read_table(f).to_pydict()
        c.update(t['status'])
        for i, s in enumerate(t['status']):
            if s == 'fail':
                print('FAIL', {k: t[k][i] for k in t if k in ('check', 'arm', 'case', 'detail')})
    print(run.split('/')[-2], dict(c))
PY
grep -h "physical_floor" /tmp/x/logs/*.run.txt | head -8
