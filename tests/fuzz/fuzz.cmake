# Fuzz targets (tests/fuzz/README.md): one for each parser lms has.
#   fuzz_trace    bench/simulate's trace reader (bench/simulate_trace.c)
#   fuzz_report   lms-report's timeline reader (tools/lms-report.c)
#   fuzz_options  the LMS_* options parser (base/options.c)
#   fuzz_access   the interposer's copy validation (interpose/access.c)
# With LMS_FUZZ=ON (make test-fuzz: clang, ASan + UBSan) each is a libFuzzer
# program, build/fuzz/fuzz/fuzz_NAME; otherwise each is built with
# tests/fuzz/replay.c, which runs its seed corpus (tests/fuzz/corpus/NAME/,
# where the inputs of fixed bugs are kept), as CTest's fuzz.NAME.
option(LMS_FUZZ "build the fuzz targets for libFuzzer (clang; make test-fuzz)" OFF)
set(fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

# lms_fuzz(NAME SOURCES... [LIBS libraries...]): fuzz_NAME from fuzz_NAME.c
function(lms_fuzz name)
  cmake_parse_arguments(F "" "" "LIBS" ${ARGN})
  set(target fuzz_${name})
  if(LMS_FUZZ)
    add_executable(${target} ${fuzz_dir}/fuzz_${name}.c ${F_UNPARSED_ARGUMENTS})
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${target} ${fuzz_dir}/fuzz_${name}.c ${fuzz_dir}/replay.c
                             ${F_UNPARSED_ARGUMENTS})
    add_test(NAME fuzz.${name} COMMAND ${target} ${fuzz_dir}/corpus/${name})
    set_tests_properties(fuzz.${name} PROPERTIES LABELS sim TIMEOUT 300
                         ENVIRONMENT "LMS_BACKEND=sim;ASAN_OPTIONS=detect_leaks=1"
                         FAIL_REGULAR_EXPRESSION "Sanitizer|runtime error:")
  endif()
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/include
                                               ${fuzz_dir})
  target_link_libraries(${target} PRIVATE ${F_LIBS})
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
endfunction()

# bench/simulate.c itself is included by fuzz_trace.c (its main renamed)
lms_fuzz(trace ${CMAKE_SOURCE_DIR}/bench/simulate_workloads.c
         ${CMAKE_SOURCE_DIR}/bench/simulate_trace.c ${CMAKE_SOURCE_DIR}/bench/simulate_bound.c
         ${CMAKE_SOURCE_DIR}/bench/simulate_model.c ${CMAKE_SOURCE_DIR}/bench/simulate_policy.c
         ${CMAKE_SOURCE_DIR}/bench/simulate_conform.c ${CMAKE_SOURCE_DIR}/bench/simulate_exit.c
         LIBS lms_core ZLIB::ZLIB)
# tools/lms-report.c is included by fuzz_report.c; the rest of lms-report beside it
lms_fuzz(report ${CMAKE_SOURCE_DIR}/tools/report_json.c ${CMAKE_SOURCE_DIR}/tools/report_read.c
         ${CMAKE_SOURCE_DIR}/tools/report_svg.c LIBS m)
# base/options.c is included by fuzz_options.c; lms_core for what it may come to call
lms_fuzz(options LIBS lms_core m)
if(TARGET lms_interpose)
  lms_fuzz(access ${CMAKE_SOURCE_DIR}/interpose/access.c ${CMAKE_SOURCE_DIR}/interpose/launch.c
           ${CMAKE_SOURCE_DIR}/interpose/scan.c ${CMAKE_SOURCE_DIR}/interpose/graph.c
           ${CMAKE_SOURCE_DIR}/interpose/trace.c ${CMAKE_SOURCE_DIR}/interpose/signature.c
           ${CMAKE_SOURCE_DIR}/interpose/tensormap.c LIBS lms_core ${CMAKE_DL_LIBS})
  target_include_directories(fuzz_access PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
endif()

# bench/simulate refuses bug 7's traces (issue 24) with FILE:LINE and exit 2
if(NOT LMS_FUZZ)
  add_test(NAME fuzz.simulate_refuses
           COMMAND sh ${fuzz_dir}/bad_traces.sh $<TARGET_FILE:bench_simulate> ${fuzz_dir}/corpus/trace)
  set_tests_properties(fuzz.simulate_refuses PROPERTIES LABELS sim TIMEOUT 300
                       ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1"
                       FAIL_REGULAR_EXPRESSION "Sanitizer|runtime error:")
endif()
