# The eleventh call: the copy shares of the final arms at 1, 32 and 64 tokens, both formats, one
# routing draw, on whichever GPU is lent (asked for an H200, where issue 28's targets are set).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name --format=csv,noheader
for pr in w8a16 w4a16; do
  timeout 100 python3 tools/bench_grouped_decode.py /tmp/c11_$pr --precision $pr --tokens 1,32,64 --seeds 0,1 --rank 0,1 \
    --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-" --variant-tokens 64 > $OUT/copy_share_$pr.log 2>&1; echo "$pr rc=$?"
  head -2 $OUT/copy_share_$pr.log | tail -1; grep -v "^precision=" $OUT/copy_share_$pr.log | grep -A4 "^prec " | head -5
done
