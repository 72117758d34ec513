# Seventh call: every GPU-marked test compiled on the device (make test-gpu), on the session's
# final kernels (local_first, pdl_peel=2, MXFP4's looping tile waiting expert by expert).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 520 make test-gpu PYTHON=python3 > $OUT/test_gpu.txt 2>&1; echo "rc=$?"
tail -15 $OUT/test_gpu.txt
