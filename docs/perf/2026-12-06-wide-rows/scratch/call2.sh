# The gated scenario with the FP8 one-pass tile's weights packed by default (FP8_PACKED), then
# the FP8 copy shares at 1, 32 and 64 tokens (one draw, both ranks) on the same machine.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name --format=csv,noheader
DEADLINE=$(( $(date +%s) + 290 )) PER_RUN_TIMEOUT=270 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -25 $OUT/gpu_run.log
cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
python3 -c "
import glob, collections, pyarrow.dataset as ds
for d in glob.glob('/tmp/g/results/*/checks'):
    c = collections.Counter(ds.dataset(d, format='parquet').to_table().column('status').to_pylist())
    print('checks of run', d.split('/')[-2], 'by status:', dict(c))" | tee $OUT/checks_count.txt
timeout 45 python3 tools/bench_grouped_decode.py /tmp/c2 --precision w8a16 --tokens 1,32,64 --seeds 0 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_w8a16.log 2>&1; echo "share rc=$?"
grep -v "^precision=" $OUT/copy_share_w8a16.log | grep -A4 "^prec " | head -5
