# Prepared for the next session (not run in this one), on an H200 where one is lent: the gated
# scenario whole with packed boxes the default (this session's second call was cut after 13 of
# 14 cases), then both formats' copy shares at 1, 32 and 64 tokens (two draws, both ranks), which
# judge issue 28's targets where they are set.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEADLINE=$(( $(date +%s) + 380 )) PER_RUN_TIMEOUT=360 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -5 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
python3 -c "
import glob, collections, pyarrow.dataset as ds
for d in glob.glob('/tmp/g/results/*/checks'):
    c = collections.Counter(ds.dataset(d, format='parquet').to_table().column('status').to_pylist())
    print('checks of run', d.split('/')[-2], 'by status:', dict(c))" | tee $OUT/checks_count.txt
for pr in w8a16 w4a16; do
  timeout 100 python3 tools/bench_grouped_decode.py /tmp/c_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  grep -v "^precision=" $OUT/copy_share_$pr.log | grep -A4 "^prec " | head -5
done
