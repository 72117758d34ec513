# Fifth call (twenty-fifth session): the one-token FP8 step beside the read floor on this H100
# (tools/bench_grouped_decode.py --floor 1: the fastest of tools/bench_decode.py's read launches
# over the touched experts' fc1 and fc2 bytes, as one step), four draws, both ranks: how far the
# 75% target is from a step that only reads its bytes. About 1 minute.
set -u
export PYTHONPATH=$PWD:$PWD/tools
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 tools/bench_grouped_decode.py /tmp/f8 --precision w8a16 --tokens 1 --floor 1 \
  --seeds 0,1,2,3 --rank 0,1 > $OUT/read_floor_w8a16.log 2>&1
echo "floor rc=$?"; grep "arm=\(sparse_decode\|read_floor\)" $OUT/read_floor_w8a16.log | sed 's/ fc1_launch=.*diff=/ diff=/' | cut -c1-260
