# Prepared for the next session (not run in this one): the FP8 tile's weights packed box by box
# (`Launch.fp8_packed`, `moebench/kernels/tile_packed.py`; placed too, as the arm) against the
# arm's launch, 16-64 tokens, three routing draws, both ranks, each step checked first, then timed
# interleaved; then the read-only kernel of 2026-12-02 (rdp.py: the tile's grid, natural rows
# against packed boxes) at the one-pass tile's box, 64 rows x 64 bytes on 6 stages.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 tools/bench_grouped_decode.py /tmp/pk --precision w8a16 --tokens 16,32,64 --seeds 0,1,2 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:1" --variant-tokens 16,32,64 > $OUT/packed_ab.log 2>&1
echo "packed rc=$?"; grep -v "^precision=" $OUT/packed_ab.log | tail -30
RSPECS=64:64:6:4 timeout 120 python3 docs/perf/2026-12-02-grouped-stream/scratch/rdp.py > $OUT/read_packed_k64.log 2>&1
echo "read rc=$?"; tail -8 $OUT/read_packed_k64.log
