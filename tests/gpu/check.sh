#!/usr/bin/env bash
# check.sh — the GPU machine's whole check in one script (≤ 8 min on one H200): (1) find or unpack
# the Debian dependencies, configure with CUDA ON and build; (2) run ctest, GPU tests included;
# (3) train Fashion-MNIST in bf16 with trainfast and time it; (4) train the same model in PyTorch
# (AMP bf16, channels_last) and compare images/s; (5) report trainfast's data-wait fraction;
# (3b) ONNX export of a CUDA-trained fastcnn run by onnxruntime vs trainfast predict/eval;
# (5b) ResNet-50 (AMP bf16, channels_last, 224 px, batch 256) fed by fastload.torch vs
# torch.utils.data.DataLoader over the same JPEGs; (6) print a table of these figures beside their targets. Self-contained: no network needed.
#
# Usage: tests/gpu/check.sh [--build DIR] [--deps PREFIX] [--quick]
#   --build DIR    build directory (default: build-gpu in the repository)
#   --deps PREFIX  an unpacked dependency prefix; default: system libraries when pkg-config finds
#                  them, else .deps/root unpacked from .deps/debs (scripts/fetch_gpu_deps.sh)
#   --quick        build + GPU tests only (no training runs)
# Environment: OUT (logs and JSON results go there; default BUILD/gpu-check), PYTHON (default
#   python3), CHECK_EPOCHS / CHECK_WIDTH / CHECK_BATCH / CHECK_LR (the Fashion-MNIST recipe, same
#   for both trainers), CHECK_TRAIN_ARGS (extra trainfast options), CHECK_BUDGET_S (default 480),
#   CHECK_RESIDUAL=1 (fastcnn --residual in both trainers), CHECK_SUITE=0 (skip the non-GPU tests), CHECK_DEVICE=cpu (dry run of the script without a GPU),
#   CHECK_DATA (packed Fashion-MNIST with train/ and test/; default samples/fashion-mnist/packed,
#   packed there from samples/fashion-mnist/data when only the IDX files were carried),
#   CHECK_PHOTOS (ImageFolder of JPEGs for the ResNet-50 loader step; default BUILD/photos/img, made
#   by bench/make_photos.py), CHECK_PHOTOS_COUNT (2560), CHECK_R50_STEPS (50, of which 10 warm-up),
#   CHECK_ONNX_EPOCHS (2: the short run whose checkpoint the ONNX step exports).
# Exit status: 0 when every target is met, 1 when one is missed or a step failed, 2 usage.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build-gpu"
deps=""
quick=0
while (($#)); do
    case "$1" in
    --build) build="$2"; shift 2 ;;
    --deps) deps="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "check.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$build"
build="$(cd "$build" && pwd)"
OUT="${OUT:-$build/gpu-check}"
mkdir -p "$OUT"
PYTHON="${PYTHON:-python3}"
EPOCHS="${CHECK_EPOCHS:-20}" WIDTH="${CHECK_WIDTH:-64}" BATCH="${CHECK_BATCH:-512}" LR="${CHECK_LR:-0.2}"
BUDGET="${CHECK_BUDGET_S:-480}"
DEVICE="${CHECK_DEVICE:-cuda}"
T0=$SECONDS
declare -A RES   # figure -> value, filled as steps finish
STATUS=0

log() { echo "[check $((SECONDS - T0))s] $*" | tee -a "$OUT/check.log"; }
left() { echo $((BUDGET - (SECONDS - T0))); }
# run_step NAME MAX_SECONDS CMD...: runs CMD with timeout min(MAX, budget left), log in $OUT/NAME.log
run_step() {
    local name="$1" max="$2"
    shift 2
    local t
    t=$(left)
    ((t > max)) && t=$max
    if ((t < 5)); then
        log "$name: skipped, time budget of ${BUDGET}s spent"
        return 124
    fi
    log "$name: $* (timeout ${t}s, log $OUT/$name.log)"
    local s=$SECONDS
    timeout --kill-after=10 "$t" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    log "$name: exit $rc after $((SECONDS - s))s"
    ((rc == 124)) && log "$name: TIMED OUT"
    return $rc
}
json_field() { # json_field FILE KEY: KEY of the last JSON line of FILE
    "$PYTHON" - "$1" "$2" <<'EOF' 2>/dev/null
import json, sys
last = None
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if line.startswith("{") and line.endswith("}"):
        try:
            last = json.loads(line)
        except ValueError:
            pass
v = (last or {}).get(sys.argv[2])
print("" if v is None else v)
EOF
}

log "fastload GPU check in $root, build $build, logs $OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tee -a "$OUT/check.log" ||
    log "nvidia-smi not available"

# ---- (1) dependencies, configure, build ------------------------------------------------------------
have_sys_deps() {
    command -v pkg-config >/dev/null || return 1
    local m
    for m in libzstd lmdb liburing libturbojpeg libjpeg libpng zlib; do pkg-config --exists "$m" || return 1; done
}
if [[ -n "$deps" ]]; then
    # assign first: `eval "$(cmd)" || ...` tests eval (of empty output), not cmd's failure
    env_lines="$("$root/scripts/unpack_deps.sh" "$root/.deps/debs" "$deps")" || { log "cannot use --deps $deps"; exit 1; }
    eval "$env_lines"
elif have_sys_deps; then
    log "dependencies: system libraries (pkg-config finds them all)"
elif [[ -d "$root/.deps/debs" ]]; then
    log "dependencies: unpacking $root/.deps/debs into $root/.deps/root"
    env_lines="$("$root/scripts/unpack_deps.sh" "$root/.deps/debs" "$root/.deps/root" 2>>"$OUT/check.log")" ||
        { log "unpack_deps.sh failed (see $OUT/check.log)"; exit 1; }
    eval "$env_lines"
    # Debian 12's OpenBLAS needs glibc >= 2.34; on an older system build without it (it is
    # optional: the CPU backend then uses its own GEMM) rather than link something that cannot run
    glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"
    if [[ -n "$glibc" ]] && [[ "$(printf '%s\n2.34\n' "$glibc" | sort -V | head -1)" != 2.34 ]]; then
        log "glibc $glibc < 2.34: building without the carried OpenBLAS"
        rm -f "$root/.deps/root/usr/lib/x86_64-linux-gnu/pkgconfig/openblas.pc"
    fi
else
    log "dependencies missing: no system -dev packages and no $root/.deps/debs"
    log "  fix: run scripts/fetch_gpu_deps.sh on a machine with network and carry .deps/debs here"
    exit 1
fi

cuda_home="${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}}"
nvcc="$(command -v nvcc || true)"
[[ -z "$nvcc" && -x "$cuda_home/bin/nvcc" ]] && nvcc="$cuda_home/bin/nvcc"
[[ -n "$nvcc" ]] || { log "nvcc not found (PATH, CUDA_HOME, /usr/local/cuda): cannot build the GPU backend"; exit 1; }
cmake_args=(-DFL_CUDA=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90)
# cuDNN: the toolkit's, else the one that ships with PyTorch's wheels (nvidia/cudnn)
if [[ ! -f "$cuda_home/include/cudnn.h" && ! -f /usr/include/cudnn.h ]]; then
    cudnn_dir="$("$PYTHON" -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))' 2>/dev/null ||
                 "$PYTHON" -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null || true)"
    if [[ -n "$cudnn_dir" && -f "$cudnn_dir/include/cudnn.h" ]]; then
        lib="$(ls "$cudnn_dir"/lib/libcudnn.so* 2>/dev/null | head -1)"
        log "cuDNN from PyTorch's wheel: $cudnn_dir ($lib)"
        cmake_args+=(-DCUDNN_INCLUDE_DIR="$cudnn_dir/include" -DCUDNN_LIBRARY="$lib")
        export LD_LIBRARY_PATH="$cudnn_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
        log "cuDNN headers not found in $cuda_home/include, /usr/include or PyTorch's nvidia.cudnn"
    fi
fi
# NCCL (optional, for the data-parallel path): the toolkit's, else PyTorch's nvidia.nccl wheel
if [[ ! -f "$cuda_home/include/nccl.h" && ! -f /usr/include/nccl.h ]]; then
    nccl_dir="$("$PYTHON" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)"
    if [[ -n "$nccl_dir" && -f "$nccl_dir/include/nccl.h" ]]; then
        log "NCCL from PyTorch's wheel: $nccl_dir"
        cmake_args+=(-DNCCL_ROOT="$nccl_dir")
        export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
fi
gen=()
if ! command -v make >/dev/null && command -v ninja >/dev/null; then gen=(-G Ninja); fi
jobs="$(nproc 2>/dev/null || echo 8)"
if ! run_step configure 90 cmake -S "$root" -B "$build" "${gen[@]}" "${cmake_args[@]}"; then
    tail -30 "$OUT/configure.log"
    log "configure failed"
    exit 1
fi
grep -E "fastload .* configuration|CUDA|cuDNN|NCCL|OpenBLAS|zstd" "$OUT/configure.log" | sed 's/^/    /'
if ! run_step build 240 cmake --build "$build" -j "$jobs"; then
    grep -E "error|Error" "$OUT/build.log" | head -30
    log "build failed"
    exit 1
fi
RES[build]=ok
trainfast="$build/trainer/trainfast"
packdata="$build/tools/packdata/packdata"

# ---- (2) the GPU tests (they must pass; the rest of the suite runs after the training runs) -------
run_step ctest_gpu 180 ctest --test-dir "$build" -L gpu -V -j 2
rc=$?
total="$(grep -Eo 'tests failed out of [0-9]+' "$OUT/ctest_gpu.log" | grep -Eo '[0-9]+$' | tail -1)"
nfail="$(grep -Eo '[0-9]+ tests failed out of' "$OUT/ctest_gpu.log" | grep -Eo '^[0-9]+' | tail -1)"
nskip="$(grep -c '\*\*\*Skipped' "$OUT/ctest_gpu.log")"
RES[gpu_tests]="${total:-0} run: $(( ${total:-0} - ${nfail:-0} - nskip )) passed, ${nfail:-?} failed, $nskip skipped"
grep -E "Test +#|SKIP|FAIL|: all |learns|done \(|bit-identical" "$OUT/ctest_gpu.log" | sed 's/^[0-9]*: //; s/^/    /' | head -30
if ((rc != 0)) || ((nskip > 0)) || [[ -z "$total" ]]; then
    STATUS=1
    RES[gpu_tests_ok]=no
else
    RES[gpu_tests_ok]=yes
fi
run_step kernel_bench 30 "$build/tests/gpu/test_kernels" --bench && sed 's/^/    /' "$OUT/kernel_bench.log"
# races inside a block on shared memory: the host emulation (kernels/emu, test_kernels_emu) finds
# them only where its index-order or reverse-order run reads first; racecheck sees the real
# interleavings (kernels run ~100x slower under it: test_kernels' sizes are small)
csan="$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")"
if [[ $DEVICE == cpu ]]; then
    RES[racecheck]=dry
elif [[ ! -x $csan ]]; then
    RES[racecheck]=absent
else
    RES[racecheck]=no
    run_step racecheck 120 "$csan" --tool racecheck --error-exitcode 1 "$build/tests/gpu/test_kernels" &&
        RES[racecheck]=yes
    [[ ${RES[racecheck]} == yes ]] || { STATUS=1; tail -8 "$OUT/racecheck.log" | sed 's/^/    /'; }
fi

# libfastload's device mode (the H2D copy on the loader's own stream): test_loader_raw requires the
# device copies to equal the host batches whenever a GPU is present
if [[ $DEVICE == cpu ]]; then
    RES[loader_device]=dry
else
    RES[loader_device]=no
    run_step loader_device 60 "$build/tests/loader/test_loader_raw" &&
        grep -q "device mode: device copies equal the host batches" "$OUT/loader_device.log" &&
        RES[loader_device]=yes
    [[ ${RES[loader_device]} == yes ]] || { STATUS=1; tail -5 "$OUT/loader_device.log" | sed 's/^/    /'; }
fi

# ---- (3) Fashion-MNIST with trainfast, bf16 ---------------------------------------------------------
fm="$root/samples/fashion-mnist"
packed="${CHECK_DATA:-$fm/packed}"
if ((!quick)) && [[ ! -f "$packed/train/manifest.json" || ! -f "$packed/test/manifest.json" ]]; then
    if [[ -s "$fm/data/train-images-idx3-ubyte.gz" ]]; then
        log "packing Fashion-MNIST from the IDX files (zstd:3)"
        mkdir -p "$packed"
        for split in train:train test:t10k; do
            name=${split%%:*} prefix=${split##*:}
            run_step "pack_$name" 60 "$packdata" pack --idx "$fm/data/$prefix-images-idx3-ubyte.gz" \
                "$fm/data/$prefix-labels-idx1-ubyte.gz" "$packed/$name" --class-names "$fm/data/classes.txt" \
                --compress zstd:3 --resume || tail -3 "$OUT/pack_$name.log"
        done
    else
        log "no Fashion-MNIST here ($packed or $fm/data): carry samples/fashion-mnist/packed to train"
    fi
fi
recipe=(--model fastcnn --width "$WIDTH" --epochs "$EPOCHS" --batch "$BATCH" --lr "$LR" --crop-pad 2)
pt_extra=()
if [[ "${CHECK_RESIDUAL:-0}" == 1 ]]; then recipe+=(--residual); pt_extra+=(--residual); fi
if ((!quick)) && [[ -f "$packed/train/manifest.json" ]]; then
    # shellcheck disable=SC2086
    run_step trainfast 120 "$trainfast" train --data "$packed/train" --val "$packed/test" "${recipe[@]}" \
        --precision bf16 --device "$DEVICE" --json --log "$OUT/trainfast.jsonl" ${CHECK_TRAIN_ARGS:-}
    rc=$?
    tail -12 "$OUT/trainfast.log" | sed 's/^/    /'
    ((rc != 0)) && STATUS=1
    j="$OUT/trainfast.log"
    RES[tf_top1]="$(json_field "$j" val_top1)"
    RES[tf_wall]="$(json_field "$j" wall_seconds)"
    RES[tf_ips]="$(json_field "$j" images_per_sec)"
    RES[tf_wait]="$(json_field "$j" data_wait_fraction)"
    RES[tf_backend]="$(json_field "$j" backend)"
    RES[tf_skipped]="$(json_field "$j" skipped_steps)"

    # ---- (4) the same model in PyTorch, AMP bf16 + channels_last ------------------------------------
    export FASTLOAD_LIBRARY="$build/libfastload.so"
    run_step pytorch 150 "$PYTHON" "$root/bench/pytorch_fmnist.py" --data "$packed/train" --val "$packed/test" \
        --idx "$fm/data" --width "$WIDTH" --epochs "$EPOCHS" --batch "$BATCH" --lr "$LR" --crop-pad 2 \
        --precision bf16 --device "$DEVICE" --json "${pt_extra[@]}"
    rc=$?
    tail -3 "$OUT/pytorch.log" | sed 's/^/    /'
    ((rc != 0)) && STATUS=1
    RES[pt_ips]="$(json_field "$OUT/pytorch.log" images_per_sec)"
    RES[pt_top1]="$(json_field "$OUT/pytorch.log" val_top1)"
    RES[pt_torch]="$(json_field "$OUT/pytorch.log" torch)"
elif ((!quick)); then
    STATUS=1 # no training run: the accuracy/speed targets are not met (the table says "not run")
fi

# ---- (3b) ONNX: a CUDA-trained model exported, run by onnxruntime, compared with trainfast ----------
# A short run of the same recipe with a checkpoint (the timed run above writes none), then
# tests/gpu/onnx_check.sh: trainfast export, onnx.checker, the Python onnxruntime (CPU provider,
# fp32) over the test set vs `trainfast predict --device cpu --logits` (<= 1e-4 of each row's
# largest logit, argmax >= 99.9%) and `eval --device cpu --no-tta` (same top-1); predict on the
# GPU (bf16) beside it as a figure.
if ((!quick)) && [[ -f "$packed/train/manifest.json" ]]; then
    RES[onnx]=no
    rm -rf "$OUT/onnx_ckpt"
    if run_step onnx_train 60 "$trainfast" train --data "$packed/train" --val "$packed/test" "${recipe[@]}" \
        --epochs "${CHECK_ONNX_EPOCHS:-2}" --precision bf16 --device "$DEVICE" --checkpoint "$OUT/onnx_ckpt" --quiet; then
        run_step onnx 120 env PYTHON="$PYTHON" "$root/tests/gpu/onnx_check.sh" "$build" "$OUT/onnx_ckpt" \
            "$packed/test" "$OUT/onnx" "$DEVICE"
        rc=$?
        tail -4 "$OUT/onnx.log" | sed 's/^/    /'
        case $rc in 0) RES[onnx]=yes ;; 77) RES[onnx]=skip ;; *) STATUS=1 ;; esac
        for k in max_rel_cpu argmax_agree_cpu top1_ort top1_eval_cpu top1_equal max_rel_dev argmax_agree_dev \
            ort_images_per_sec; do
            RES[onnx_$k]="$(json_field "$OUT/onnx.log" "$k")"
        done
    else
        tail -3 "$OUT/onnx_train.log" | sed 's/^/    /'
        STATUS=1
    fi
fi

# ---- (5b) ResNet-50 fed by fastload.torch vs torch.utils.data.DataLoader over the same photo JPEGs ----
# examples/pytorch_train.py, AMP bf16, channels_last, batch 256 at 224 px (RandomResizedCrop + flip in
# both), CHECK_R50_STEPS steps of which the first 10 are left out; each prints images/s, data-wait
# fraction and the GPU's mean utilisation (nvidia-smi). The photos: CHECK_PHOTOS (an ImageFolder) or
# made by bench/make_photos.py from the skimage sample photographs (installed, or carried as
# .deps/photo-src/skimage/data, see README.md), packed by packdata into BUILD/photos-packed.
photos="${CHECK_PHOTOS:-$build/photos/img}"
photos_packed="$build/photos/packed"
if [[ $DEVICE == cpu ]]; then
    RES[r50]=dry
    log "resnet50 loaders: skipped (CHECK_DEVICE=cpu: needs a GPU)"
elif ((!quick)); then
    RES[r50]=nodata
    if [[ ! -d "$photos" ]]; then
        run_step make_photos 90 env PYTHONPATH="$root/.deps/photo-src${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" \
            "$root/bench/make_photos.py" "$photos" --count "${CHECK_PHOTOS_COUNT:-2560}" --mean-pixels 150000 ||
            { tail -3 "$OUT/make_photos.log" | sed 's/^/    /'; rm -rf "$photos"; }
    fi
    if [[ -d "$photos" && ! -f "$photos_packed/manifest.json" ]]; then
        run_step pack_photos 60 "$packdata" pack "$photos" "$photos_packed" || tail -3 "$OUT/pack_photos.log"
    fi
    if [[ -f "$photos_packed/manifest.json" ]]; then
        RES[r50]=run
        export FASTLOAD_LIBRARY="$build/libfastload.so"
        r50=(--device cuda --model resnet50 --size 224 --batch 256 --amp bf16 --channels-last --epochs 100000
             --max-steps "${CHECK_R50_STEPS:-50}" --warmup-steps 10 --json)
        for l in fastload torch; do
            run_step "r50_$l" 120 "$PYTHON" "$root/examples/pytorch_train.py" "$photos_packed" --loader "$l" \
                --image-folder "$photos" "${r50[@]}" || STATUS=1
            tail -2 "$OUT/r50_$l.log" | sed 's/^/    /'
            for k in images_per_sec data_wait_fraction gpu_util; do
                RES[r50_${l}_$k]="$(json_field "$OUT/r50_$l.log" "$k")"
            done
        done
    else
        STATUS=1
    fi
fi

# ---- the rest of the suite last: on the GPU machine it matters least, so it gets the time left ----
if ((!quick)) && [[ "${CHECK_SUITE:-1}" != 0 ]]; then
    run_step ctest_all 150 ctest --test-dir "$build" -LE gpu -j "$jobs" --timeout 120
    RES[all_tests]="$(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$OUT/ctest_all.log" | tail -1)"
    grep -E "\(Failed\)|\(Timeout\)|\*\*\*" "$OUT/ctest_all.log" | sed 's/^/    /' | head -20
fi

# ---- (6) summary -------------------------------------------------------------------------------------
"$PYTHON" - "$OUT/summary.json" <<EOF
import json, sys
R = {k: v for k, v in [l.split("=", 1) for l in """$(for k in "${!RES[@]}"; do echo "$k=${RES[$k]}"; done)""".splitlines() if "=" in l]}
def num(k):
    try:
        return float(R.get(k, ""))
    except ValueError:
        return None
rows, ok = [], True
def row(name, value, target, passed):
    global ok
    verdict = "-" if passed is None else ("PASS" if passed else "MISS")
    if passed is False:
        ok = False
    rows.append((name, value, target, verdict))
t1, wall, ips, wait, pt = num("tf_top1"), num("tf_wall"), num("tf_ips"), num("tf_wait"), num("pt_ips")
row("GPU tests (ctest -L gpu)", R.get("gpu_tests", "not run") or "not run", "all pass, none skipped",
    R.get("gpu_tests_ok") == "yes")
ld = R.get("loader_device")
row("loader device mode (H2D on its own stream)",
    {"yes": "device copies equal host batches", "dry": "not run (CHECK_DEVICE=cpu)"}.get(ld, "failed"),
    "works", None if ld == "dry" else ld == "yes")
rc_ = R.get("racecheck")
row("kernels under compute-sanitizer racecheck",
    {"yes": "no hazard", "dry": "not run (CHECK_DEVICE=cpu)",
     "absent": "not run (no compute-sanitizer)"}.get(rc_, "hazards or failure"),
    "no hazard", None if rc_ in ("dry", "absent", None) else rc_ == "yes")
if "all_tests" in R:
    row("whole suite (ctest -LE gpu)", R["all_tests"] or "not run", "all pass", None)
row("Fashion-MNIST test top-1, bf16", f"{100*t1:.2f}%" if t1 is not None else "not run", ">= 94%",
    None if t1 is None else t1 >= 0.94)
row("trainfast wall time", f"{wall:.2f} s" if wall is not None else "not run", "<= 10 s",
    None if wall is None else wall <= 10.0)
row("trainfast images/s", f"{ips:,.0f}" if ips is not None else "not run", "", None)
row("PyTorch AMP bf16 channels_last images/s", f"{pt:,.0f}" if pt is not None else "not run", "", None)
sp = ips / pt if ips and pt else None
row("trainfast / PyTorch images/s", f"{sp:.2f}x" if sp else "n/a", ">= 1.2x", None if sp is None else sp >= 1.2)
row("trainfast data-wait fraction", f"{100*wait:.2f}%" if wait is not None else "not run", "< 2%",
    None if wait is None else wait < 0.02)
r50 = R.get("r50")
if r50:
    why = {"dry": "not run (CHECK_DEVICE=cpu)", "nodata": "not run (no photo set)"}.get(r50)
    def fig(loader, k, fmt):
        v = num(f"r50_{loader}_{k}")
        return (why or "failed") if v is None else fmt(v)
    for l, name in (("fastload", "fastload.torch"), ("torch", "DataLoader")):
        row(f"ResNet-50 bf16 224px b256, {name}: images/s", fig(l, "images_per_sec", lambda v: f"{v:,.0f}"), "", None)
        row(f"ResNet-50, {name}: GPU utilisation", fig(l, "gpu_util", lambda v: f"{v:.0f}%"), "", None)
    fw, tw = num("r50_fastload_data_wait_fraction"), num("r50_torch_data_wait_fraction")
    row("ResNet-50, fastload.torch: data wait", fig("fastload", "data_wait_fraction", lambda v: f"{100*v:.1f}%"),
        "< 5% of step time", None if r50 == "dry" else (fw is not None and fw < 0.05))
    row("ResNet-50, DataLoader: data wait (peer)", fig("torch", "data_wait_fraction", lambda v: f"{100*v:.1f}%"),
        "", None)
    fi, ti = num("r50_fastload_images_per_sec"), num("r50_torch_images_per_sec")
    if fi and ti:
        row("ResNet-50 fastload.torch / DataLoader images/s", f"{fi / ti:.2f}x", "", None)
on = R.get("onnx")
if on:
    skip = on == "skip"
    mr, ag, t_o, t_e = num("onnx_max_rel_cpu"), num("onnx_argmax_agree_cpu"), num("onnx_top1_ort"), num("onnx_top1_eval_cpu")
    row("ONNX export (CUDA-trained) vs predict fp32: max |diff|/row max",
        f"{mr:.2g}" if mr is not None else ("skipped (onnx.log says why)" if skip else "failed"), "<= 1e-4",
        None if skip else (mr is not None and mr <= 1e-4))
    row("ONNX vs predict fp32: argmax identical", f"{100*ag:.3f}%" if ag is not None else "n/a", ">= 99.9%",
        None if skip else (ag is not None and ag >= 0.999))
    row("ONNX Runtime top-1 vs eval --no-tta",
        f"{100*t_o:.2f}% vs {100*t_e:.2f}%" if t_o is not None and t_e is not None else "n/a", "equal",
        None if skip else R.get("onnx_top1_equal") == "True")
    md, ad = num("onnx_max_rel_dev"), num("onnx_argmax_agree_dev")
    if md is not None and ad is not None:
        row("ONNX fp32 vs predict on the GPU (bf16): max |diff|/row max, argmax",
            f"{md:.2g}, {100*ad:.2f}%", "", None)
    oi = num("onnx_ort_images_per_sec")
    if oi is not None:
        row("onnxruntime images/s (CPU provider, batch 256)", f"{oi:,.0f}", "", None)
pt1 = num("pt_top1")
if pt1 is not None:
    row("PyTorch test top-1 (reference)", f"{100*pt1:.2f}%", "", None)
w = [max(len(r[i]) for r in rows + [("figure", "measured", "target", "result")]) for i in range(4)]
print()
print("  ".join(h.ljust(w[i]) for i, h in enumerate(("figure", "measured", "target", "result"))))
print("  ".join("-" * w[i] for i in range(4)))
for r in rows:
    print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
if R.get("tf_backend"):
    print(f"\ntrainfast backend: {R['tf_backend']}; fp16/bf16 skipped steps: {R.get('tf_skipped', '?')}")
if R.get("pt_torch"):
    print(f"PyTorch {R['pt_torch']}")
json.dump({"rows": rows, "raw": R, "all_targets_met": ok}, open(sys.argv[1], "w"), indent=1)
sys.exit(0 if ok else 1)
EOF
py_rc=$?
((STATUS == 0)) && STATUS=$py_rc
log "total $((SECONDS - T0)) s (budget ${BUDGET} s); summary in $OUT/summary.json"
exit $STATUS
