# Programs built with nvcc that run only on a card (label gpu): included from
# tests/CMakeLists.txt.
#
#   build/tests/preload_probe  tests/gpu/preload_probe.cu: every way a kernel
#                              reaches evicted memory, under the preload
#                              (with tests/gpu/probe_library.cu, a library it
#                              loads at run time)
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

set(lms_gpu_dir ${CMAKE_CURRENT_LIST_DIR})

# Anywhere, nvcc or not (it runs no binary): the trace check of
# preload-probe.sh, which otherwise runs only on a card, on canned probe
# output and traces (tests/gpu/fixtures/): the passing pair must pass and
# the failing pair fail, on the cases it breaks and for their reasons.
add_test(NAME preload_probe.checker COMMAND sh ${lms_gpu_dir}/test-checker.sh)
set_tests_properties(preload_probe.checker PROPERTIES LABELS sim TIMEOUT 60)

if(LMS_SANITIZE OR NOT CUDAToolkit_NVCC_EXECUTABLE OR NOT EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
  return()
endif()
find_program(LMS_NVCC_HOST_CXX NAMES g++ c++)
if(NOT LMS_NVCC_HOST_CXX)
  message(STATUS "lms: no g++ for nvcc: the GPU probe and benchmarks (tests/gpu) are not built")
  return()
endif()

# The toolkit's libraries are found where they were at build time (rpath),
# as CMake does for the programs it links.
set(lms_nvcc_flags -O2 -std=c++17 -ccbin ${LMS_NVCC_HOST_CXX}
    -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
    -cudart shared -Xcompiler -Wall,-Wextra,-Wno-missing-field-initializers
    -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}
    -L${CUDAToolkit_LIBRARY_DIR} -Xlinker -rpath -Xlinker ${CUDAToolkit_LIBRARY_DIR})

# lms_nvcc_program(TARGET OUTPUT SOURCE [FLAGS...] [DEPENDS FILES...]):
# OUTPUT built from SOURCE with the flags above and FLAGS, in ALL; rebuilt
# when SOURCE, the headers the programs share or FILES change.
function(lms_nvcc_program target output source)
  cmake_parse_arguments(PARSE_ARGV 3 arg "" "" "DEPENDS")
  get_filename_component(dir ${output} DIRECTORY)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} ${lms_nvcc_flags} -o ${output} ${source}
            ${arg_UNPARSED_ARGUMENTS} -ldl
    DEPENDS ${source} ${CMAKE_SOURCE_DIR}/include/lms.h ${CMAKE_SOURCE_DIR}/bench/bench.h
            ${lms_gpu_dir}/gpu_program.h ${arg_DEPENDS}
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
find_program(LMS_BIN2C bin2c HINTS ${CUDAToolkit_BIN_DIR})
if(NOT LMS_BIN2C)
  message(STATUS "lms: no bin2c beside nvcc: the preload probe (tests/gpu/preload_probe.cu) "
                 "is not built")
  return()
endif()
get_filename_component(lms_nccl_dir ${LMS_NCCL_LIBRARY} DIRECTORY)

# The library its case driver_cukernel loads with cudaLibraryLoadData:
# tests/gpu/probe_library.cu as a fatbin (sm_90 + PTX), embedded in the
# probe as the array probe_library_fatbin (bin2c, 8-byte aligned) of
# probe_library_fatbin.h.
set(lms_probe_gen ${CMAKE_BINARY_DIR}/tests/gpu)
set(lms_probe_library ${lms_probe_gen}/probe_library.fatbin)
add_custom_command(
  OUTPUT ${lms_probe_gen}/probe_library_fatbin.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${lms_probe_gen}
  COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -fatbin -O2 -std=c++17 -ccbin ${LMS_NVCC_HOST_CXX}
          -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
          -I${CMAKE_SOURCE_DIR} -o ${lms_probe_library} ${lms_gpu_dir}/probe_library.cu
  COMMAND sh -c "\"$0\" --const --static --type longlong --name probe_library_fatbin \"$1\" >\"$2\""
          ${LMS_BIN2C} ${lms_probe_library} ${lms_probe_gen}/probe_library_fatbin.h
  DEPENDS ${lms_gpu_dir}/probe_library.cu ${lms_gpu_dir}/probe_kernels.h
  COMMENT "nvcc: the preload probe's run-time library for sm_90 + PTX"
  VERBATIM)

set(lms_probe ${CMAKE_BINARY_DIR}/tests/preload_probe)
lms_nvcc_program(preload_probe ${lms_probe} ${lms_gpu_dir}/preload_probe.cu
                 -I${LMS_NCCL_INCLUDE_DIR} -I${lms_probe_gen} -L${lms_nccl_dir}
                 -lcublas -lcublasLt -lnccl
                 DEPENDS ${lms_gpu_dir}/probe_kernels.h ${lms_probe_gen}/probe_library_fatbin.h)

# On a card: the probe under the preload, then its access trace checked
# (tests/gpu/preload-probe.sh); skipped (77) without a CUDA device.
add_test(NAME gpu.preload_probe
         COMMAND sh ${lms_gpu_dir}/preload-probe.sh ${CMAKE_BINARY_DIR}
                 ${CMAKE_BINARY_DIR}/tests/preload_probe.out)
set_tests_properties(gpu.preload_probe PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
# Anywhere: that it was built, that its launches are the ones the probe is
# about (<<<>>> is nvcc 13's __cudaLaunchKernel; the cooperative launch; a
# library loaded at run time; the driver looked up through the runtime),
# and that it does not need libcuda (only a card's driver has the real one).
add_test(NAME preload_probe.builds COMMAND sh -c
  "syms=$(nm -D --undefined-only \"$0\") || exit 1; for s in __cudaLaunchKernel cudaLaunchCooperativeKernel cudaLaunchKernel cudaLibraryLoadData cudaGetDriverEntryPointByVersion; do echo \"$syms\" | grep -Eq \" \$s(@|\$)\" || { echo \"$0 does not reference \$s\"; exit 1; }; echo \"references \$s\"; done; if readelf -d \"$0\" | grep -q 'NEEDED.*libcuda[.]so'; then echo \"$0 needs libcuda\"; exit 1; fi; echo 'needs no libcuda'"
  ${lms_probe})
set_tests_properties(preload_probe.builds PROPERTIES LABELS sim TIMEOUT 60)
