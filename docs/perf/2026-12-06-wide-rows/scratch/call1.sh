# The twenty-first session's prepared call (packed boxes against the arm's launch, 16-64 tokens,
# three draws, both ranks; the read-only kernel at the one-pass box), then the FP8 tile over 128
# rows a program on 4 warps: each step's slots' operand (up to 2 KB, from L2) read once for 128
# weight rows instead of 64, half the operand's L2 traffic a weight byte. No register cap (94-100
# registers, no spill, 4 programs an SM; sm_90a offline) on 6 stages, or 96 on 5 (5 an SM); fc1
# alone (5,760 rows), fc2 alone (2,880 rows: its last row block an expert ragged, `grouped_gemv`),
# or both.
set -u
export PYTHONPATH=$PWD:$PWD/tools
bash docs/perf/2026-12-05-step-timeline/scratch/next_call.sh
timeout 270 python3 tools/bench_grouped_decode.py /tmp/wr --precision w8a16 --tokens 16,32,64 --seeds 0,1 --rank 0,1 \
  --variants "dot:-:128:-:4:-:-:-:0:-:-:1,dot:-:128:-:4:-:-:-:0:-:-:2:-:-:-:1,dot:-:128:-:4:-:-:-:0:-:-:-:-:-:-:1,dot:-:128:-:4:5:-:-:96:-:-:-:-:-:-:1" \
  --variant-tokens 16,32,64 > $OUT/wide_rows.log 2>&1
echo "wide rc=$?"; grep -v "^precision=" $OUT/wide_rows.log | tail -40
