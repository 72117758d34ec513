# Call 3 of the twenty-eighth session: the MXFP4 tile's values stored in its K order
# (`Launch.mx_dot_order`, `mx_dot_order.dot_order_mxfp4`: the slots' operand read as the
# pipeline's copy lays it, no longer loaded, permuted and stored again every step) against the
# arm (packed bytes and scales), on its stages and on 4 stages (the one-pass tile takes 3; the
# expert loop 4 already: that variant is skipped there), at 4, 8, 16, 32 and 64 tokens, two
# draws, both ranks.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
D=":-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:-:1"
BENCH_TIME_BUDGET_S=200 timeout 280 python3 tools/bench_grouped_decode.py /tmp/do --precision w4a16 \
  --tokens 4,8,16,32,64 --seeds 0,1 --rank 0,1 --variants "dot$D,dot:-:-:-:-:4$(printf ":-%.0s" $(seq 1 13)):1" --variant-tokens 4,8,16,32,64 \
  > $OUT/dot_order.log 2>&1
echo "bench rc=$?"; grep -A20 "^slowest" $OUT/dot_order.log
