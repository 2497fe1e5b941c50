/* kernels_host.cpp — every .cu source of kernels/, unchanged, compiled by the host C++ compiler
 * against the CUDA host shim (FLK_HOST_EMU: flk_cuda_host.h) into the library fl_kernels_emu that
 * tests/gpu/test_kernels runs on the CPU. kernels/CMakeLists.txt refuses to configure when a .cu
 * file is missing from this list, so no kernel escapes the check. */
#include "../input.cu"
#include "../layers.cu"
#include "../loss.cu"
#include "../optim.cu"
