B=build-gpu/src/api/deepinfer
P="--device cuda --random-weights --preset v4-flash --peak-gbs 4300 --peak-tflops 790"
timeout 150 build-gpu/tests/cuda/cuda_op_bench 2>&1 | grep -A26 "sweep"
for t in 792 0 264; do
echo "== split target $t"
DEEPINFER_DENSE_SPLIT_TARGET=$t timeout 150 $B bench $P --num-layers 9 --mode decode --synthetic-context --context-length 4096 --decode-num-requests 1,8,64 --warmup-steps 3 --num-steps 20 --overlap 2>&1 | grep "decode/o"
done
for t in 792 0; do
echo "== profile split target $t"
DEEPINFER_DENSE_SPLIT_TARGET=$t OUT=$OUT/kp$t BY_GRID=1 TOP=14 CASES="decode:1" timeout 200 bash tools/device/kernel_profile.sh 2>&1 | grep -E "TileShape<16, 16|TOTAL"
done
