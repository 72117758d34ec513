# Prepared for the next session (not run in this one): the FP8 tile's weights packed box by box
# (`Launch.fp8_packed`, `moebench/kernels/tile_packed.py`; placed too, as the arm) against the
# arm's launch, 16-64 tokens, three routing draws, both ranks, each step checked first, then timed
# interleaved; then the read of the same launch at 64 tokens beside it (--floor 64).
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 tools/bench_grouped_decode.py /tmp/pk --precision w8a16 --tokens 16,32,64 --seeds 0,1,2 --rank 0,1 \
  --variants "dot:-:-:-:-:-:-:-:-:-:-:-:-:-:1" --variant-tokens 16,32,64 > $OUT/packed_ab.log 2>&1
echo "packed rc=$?"; grep -v "^precision=" $OUT/packed_ab.log | tail -30
