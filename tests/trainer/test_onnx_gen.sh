#!/usr/bin/env bash
# test_onnx_gen.sh — the committed ONNX schema code (trainer/onnx_gen: protoc-c 1.4.1 over onnx
# 1.12.0's onnx.proto, used where protoc-c cannot run) equals what this build generated, when the
# build generated it from the same onnx.proto. Skips (77) when the build used the committed copy
# or the system's onnx.proto is another version (then the committed copy is simply older).
set -u
B="${FL_BINARY_DIR:?}" S="${FL_SOURCE_DIR:?}"
gen="$B/trainer/onnx_gen" ref="$S/trainer/onnx_gen"
[[ -f $gen/onnx.pb-c.c ]] || { echo "skip: this build uses the committed schema code"; exit 77; }
cmp -s "$gen/onnx.proto" "$ref/onnx.proto" ||
    { echo "skip: the system's onnx.proto is not the committed one (another onnx version)"; exit 77; }
for f in onnx.pb-c.c onnx.pb-c.h; do
    cmp "$gen/$f" "$ref/$f" || { echo "FAIL: $ref/$f differs from protoc-c's output $gen/$f: regenerate it (see trainer/export/export_onnx.cmake)"; exit 1; }
done
echo "ok   trainer/onnx_gen equals protoc-c's output for the same onnx.proto"
echo PASS
