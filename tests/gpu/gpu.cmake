# Programs built with nvcc that run only on a card (label gpu): included from
# tests/CMakeLists.txt.
#
#   build/tests/preload_probe  tests/gpu/preload_probe.cu: every way a kernel
#                              reaches evicted memory, under the preload
#   build/bench/launch_gpu     bench/launch_gpu.cu: a hooked launch's cost
#   build/bench/host_numa      bench/host_numa.cu: host-located VMM blocks
#                              mapped into lms's range
#
# Each is an unmodified CUDA program: nvcc builds it (as the test kernels'
# fatbin is built, by a custom command: CMake's CUDA language stays off)
# against the shared libcudart, for sm_90 plus PTX, and it never links
# liblms: the lms functions it needs come from the preloaded liblms.so by
# dlsym. Not in sanitized builds, whose liblms.so cannot be preloaded; only
# where nvcc and a host C++ compiler for it are.
if(LMS_SANITIZE OR NOT CUDAToolkit_NVCC_EXECUTABLE OR NOT EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  return()
endif()
find_program(LMS_NVCC_HOST_CXX NAMES g++ c++)
if(NOT LMS_NVCC_HOST_CXX)
  message(STATUS "lms: no g++ for nvcc: the GPU probe and benchmarks (tests/gpu) are not built")
  return()
endif()

set(lms_gpu_dir ${CMAKE_CURRENT_LIST_DIR})
# The toolkit's libraries are found where they were at build time (rpath),
# as CMake does for the programs it links.
set(lms_nvcc_flags -O2 -std=c++17 -ccbin ${LMS_NVCC_HOST_CXX}
    -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
    -cudart shared -Xcompiler -Wall,-Wextra,-Wno-missing-field-initializers
    -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}
    -L${CUDAToolkit_LIBRARY_DIR} -Xlinker -rpath -Xlinker ${CUDAToolkit_LIBRARY_DIR})

# lms_nvcc_program(TARGET OUTPUT SOURCE [LIBS...]): OUTPUT built from SOURCE
# with the flags above, in ALL.
function(lms_nvcc_program target output source)
  get_filename_component(dir ${output} DIRECTORY)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} ${lms_nvcc_flags} -o ${output} ${source} ${ARGN} -ldl
    DEPENDS ${source} ${CMAKE_SOURCE_DIR}/include/lms.h ${CMAKE_SOURCE_DIR}/bench/bench.h
            ${lms_gpu_dir}/gpu_program.h
    COMMENT "nvcc: ${output} for sm_90 + PTX"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS ${output})
endfunction()

lms_nvcc_program(bench_launch_gpu ${CMAKE_BINARY_DIR}/bench/launch_gpu
                 ${CMAKE_SOURCE_DIR}/bench/launch_gpu.cu)
lms_nvcc_program(bench_host_numa ${CMAKE_BINARY_DIR}/bench/host_numa
                 ${CMAKE_SOURCE_DIR}/bench/host_numa.cu)

# The preload probe also needs cuBLAS, cuBLASLt and NCCL from the toolkit.
find_path(LMS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
find_library(LMS_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
if(NOT TARGET CUDA::cublas OR NOT TARGET CUDA::cublasLt OR NOT LMS_NCCL_INCLUDE_DIR
   OR NOT LMS_NCCL_LIBRARY)
  message(STATUS "lms: no cuBLAS, cuBLASLt or NCCL in the toolkit: the preload probe "
                 "(tests/gpu/preload_probe.cu) is not built")
  return()
endif()
get_filename_component(lms_nccl_dir ${LMS_NCCL_LIBRARY} DIRECTORY)
set(lms_probe ${CMAKE_BINARY_DIR}/tests/preload_probe)
lms_nvcc_program(preload_probe ${lms_probe} ${lms_gpu_dir}/preload_probe.cu
                 -I${LMS_NCCL_INCLUDE_DIR} -L${lms_nccl_dir} -lcublas -lcublasLt -lnccl)

# On a card: the probe under the preload, then its access trace checked
# (tests/gpu/preload-probe.sh); skipped (77) without a CUDA device.
add_test(NAME gpu.preload_probe
         COMMAND sh ${lms_gpu_dir}/preload-probe.sh ${CMAKE_BINARY_DIR}
                 ${CMAKE_BINARY_DIR}/tests/preload_probe.out)
set_tests_properties(gpu.preload_probe PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
# Anywhere: that it was built, and that its launches are the ones the probe
# is about (<<<>>> is nvcc 13's __cudaLaunchKernel; the cooperative launch).
add_test(NAME preload_probe.builds COMMAND sh -c
  "syms=$(nm -D --undefined-only \"$0\") || exit 1; for s in __cudaLaunchKernel cudaLaunchCooperativeKernel cudaLaunchKernel; do echo \"$syms\" | grep -Eq \" \$s(@|\$)\" || { echo \"$0 does not reference \$s\"; exit 1; }; echo \"references \$s\"; done"
  ${lms_probe})
set_tests_properties(preload_probe.builds PROPERTIES LABELS sim TIMEOUT 60)
