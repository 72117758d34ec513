# One bench over the targets' counts (16, 32, 64 tokens; two routing draws, both ranks), the
# arm's launch against: the FP8 tile's weights packed box by box (`Launch.fp8_packed`, the
# twenty-first session's prepared variant), and 128 rows a program on 4 warps: each step's slots'
# operand (up to 2 KB, from L2) read once for 128 weight rows instead of 64, half the operand's L2
# traffic a weight byte; no register cap (94-100 registers, no spill, 4 programs an SM; sm_90a
# offline); fc1 alone (5,760 rows), fc2 alone (2,880 rows: an expert's last row block ragged,
# `grouped_gemv`), both; and both on 5 stages at 96 registers (5 programs an SM).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
BENCH_TIME_BUDGET_S=200 timeout 300 python3 tools/bench_grouped_decode.py /tmp/wr --precision w8a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:1,dot:-:128:-:4:-:-:-:0:-:-:1,dot:-:128:-:4:-:-:-:0:-:-:2:-:-:-:1,dot:-:128:-:4:-:-:-:0:-:-:-:-:-:-:1,dot:-:128:-:4:5:-:-:96:-:-:-:-:-:-:1" \
  --variant-tokens 16,32,64 > $OUT/wide_rows.log 2>&1
echo "bench rc=$?"; grep -v "^precision=" $OUT/wide_rows.log | tail -60
