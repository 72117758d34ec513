# Call 2 of the thirty-first session (2026-12-07), for when the device time left allows no more
# than about 280 s (call1.sh never found a machine): call 1's part 2 alone, then the compiled
# kernel's bits. The MXFP4 tile's scale pair as one multiply (4a21460; sm_90a 241 instructions a
# step against 249 on the one-pass tile) against the shifts and the or it replaced (sed on the
# device's copy): the arms alone at 8-64 tokens, draws 0 and 1, both ranks, new, old, new;
# dense_decode and sparse_decode, which the line does not touch, say how far the machine drifted
# between runs. Then, in the time left, the grouped kernel tests on the GPU (bit for bit against
# the natural layout and the reference numerics) on the new line.
set -u
export PYTHONPATH=$PWD:$PWD/tools
CALL_END=${CALL_END:-$(( $(date +%s) + 270 ))}
left() { echo $(( CALL_END - $(date +%s) )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
F=moebench/kernels/mx_rotated.py
NEW="pair = s32 \* 0x00800080  # biased"
OLD="bits = s32 << 7; pair = bits | (bits << 16)  # biased"
arms() {  # the three arms, no variant (the only one is at 1 token, not swept)
  timeout $2 python3 tools/bench_grouped_decode.py /tmp/$1 --precision w4a16 --tokens 8,16,32,64 \
    --seeds 0,1 --rank 0,1 --variants dot --variant-tokens 1 > $OUT/$1.log 2>&1
  echo "$1 rc=$?"; grep -A20 "^slowest" $OUT/$1.log | grep -v "^\s*$"
}
arms new1 75
sed -i "s/$NEW/$OLD/" $F; grep -n "# biased bytes" $F
arms old 60
sed -i "s/$OLD/pair = s32 * 0x00800080  # biased/" $F; grep -n "# biased bytes" $F
arms new2 50
if [ $(left) -gt 30 ]; then
  timeout $(( $(left) - 5 )) python3 -m pytest -q -x tests/kernels/test_grouped_decode.py \
    -k "mxfp4" > $OUT/gpu_tests.log 2>&1
  echo "gpu tests rc=$?"; tail -3 $OUT/gpu_tests.log
fi
