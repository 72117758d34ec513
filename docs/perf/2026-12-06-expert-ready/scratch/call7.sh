# With fc2 waiting for fc1 expert by expert the default (FP8 one-pass tiles, 16-64 tokens): the
# whole gated scenario, then both formats' copy shares at 1, 32 and 64 tokens (two draws, both
# ranks; FP8 with the whole-grid wait beside it as a variant, ready 0), then the looping tile
# (2-8 tokens) with the expert-by-expert wait as a variant (ready 1).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
DEADLINE=$(( $(date +%s) + 330 )) PER_RUN_TIMEOUT=320 bash tools/gpu_run.sh /tmp/g scenarios/gpt-oss-20b-decode-grouped.yaml > $OUT/gpu_run.log 2>&1
echo "gated rc=$?"; tail -3 $OUT/gpu_run.log; cp /tmp/g/gpu_run.tgz /tmp/g/summary.txt $OUT/
python3 -c "
import glob, collections, pyarrow.dataset as ds
for d in glob.glob('/tmp/g/results/*/checks'):
    c = collections.Counter(ds.dataset(d, format='parquet').to_table().column('status').to_pylist())
    print('checks of run', d.split('/')[-2], 'by status:', dict(c))" | tee $OUT/checks_count.txt
W="dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:0"
timeout 90 python3 tools/bench_grouped_decode.py /tmp/c8 --precision w8a16 --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
  --variants "$W" --variant-tokens 32,64 > $OUT/copy_share_w8a16.log 2>&1; echo "w8a16 rc=$?"
grep -A10 "^slowest of ranks" $OUT/copy_share_w8a16.log | head -10; grep "^w8a16 " $OUT/copy_share_w8a16.log
timeout 70 python3 tools/bench_grouped_decode.py /tmp/c4 --precision w4a16 --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_w4a16.log 2>&1; echo "w4a16 rc=$?"
grep "^w4a16 " $OUT/copy_share_w4a16.log
timeout 80 python3 tools/bench_grouped_decode.py /tmp/lp --precision w8a16 --tokens 2,4,8 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1" --variant-tokens 2,4,8 > $OUT/ready_loop.log 2>&1; echo "loop rc=$?"
grep -A12 "^slowest of ranks" $OUT/ready_loop.log | head -12
for f in $OUT/*.log; do echo "$f: $(grep -c 'ok=True sentinels=pass' $f) rows pass, $(grep -c 'ok=False\|sentinels=fail' $f) fail"; done
