# Call 2 of the thirty-second session (2026-12-07): the gated scenario with MXFP4's one-pass tile
# on the persistent grid (PASS_GRID_MXFP4_STREAM_K = STREAM programs an SM, set in the device's
# copy of grouped_launch.py, with PASS_GRID_MXFP4_MAX_REGISTERS = REGS and PASS_GRID_STAGES =
# STAGES where given), every gate and integrity check, then the checks parquet counted by status.
set -u
export PYTHONPATH=$PWD:$PWD/tools
G=moebench/kernels/grouped_launch.py
sed -i "s/^PASS_GRID_MXFP4_STREAM_K = [0-9]*$/PASS_GRID_MXFP4_STREAM_K = ${STREAM:-6}/" $G
[ -n "${REGS:-}" ] && sed -i "s/^PASS_GRID_MXFP4_MAX_REGISTERS = [0-9]*$/PASS_GRID_MXFP4_MAX_REGISTERS = $REGS/" $G
[ -n "${STAGES:-}" ] && sed -i "s/^PASS_GRID_STAGES = [0-9]*$/PASS_GRID_STAGES = $STAGES/" $G
grep -n "^PASS_GRID_MXFP4_\|^PASS_GRID_STAGES" $G
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEADLINE=$(( $(date +%s) + ${RUN_S:-250} )) PER_RUN_TIMEOUT=$(( ${RUN_S:-250} - 5 )) bash tools/gpu_run.sh /tmp/g \
  scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -3 $OUT/gpu_run.log; cp /tmp/g/summary.txt /tmp/g/gpu_run.tgz $OUT/ 2>/dev/null
python3 - <<'PY' > $OUT/checks_count.txt 2>&1
import glob, collections, pyarrow.parquet as pq
for f in sorted(glob.glob('/tmp/g/**/checks*.parquet', recursive=True)):
    t = pq.read_table(f).to_pydict()
    print(f, dict(collections.Counter(t['status'])))
    for i, s in enumerate(t['status']):
        if s == 'fail':
            print('FAIL', {k: t[k][i] for k in t if k in ('check', 'arm', 'case', 'detail')})
PY
cat $OUT/checks_count.txt | head -20
grep -h "grouped_decode" /tmp/g/summary.txt 2>/dev/null | head -20
