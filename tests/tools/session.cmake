# tools/gpu-session.sh's dry run on sim: included from tests/CMakeLists.txt.
# Every call of the plan `first` with no card visible, on this build (nothing
# is compiled), each into its own folder OUTDIR/callN: every step must pass or
# skip (77), the steps that need a card are listed as skipped, and each call's
# folder holds at most the 8 files the device tool brings back (the script's
# --dry-run says so). Its preload steps
# (the preload probe, launch_gpu, host_numa) load liblms.so into programs that
# are not instrumented, which an ASan build cannot: unsanitized builds only,
# as the malloc probes.
if(NOT LMS_SANITIZE)
  set(session_dir ${CMAKE_BINARY_DIR}/tests/session)
  add_test(NAME tools.gpu_session_dry_run
           COMMAND sh -c "rm -rf \"$1\" && sh tools/gpu-session.sh --dry-run \"$1\" first"
                   gpu-session ${session_dir}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(tools.gpu_session_dry_run PROPERTIES LABELS sim TIMEOUT 300
                       ENVIRONMENT "LMS_GPU_BUILD=${CMAKE_BINARY_DIR}")
endif()

# The script's gate for issue 27's steps (swap_modes, test_swap_host,
# stress_host): lms-info's answer to LMS_EVICTED=host decides whether they run
# or skip, read here from a stand-in lms-info giving each answer
# (tests/tools/session_host_mode.sh); no build is used.
add_test(NAME tools.gpu_session_host_mode
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/session_host_mode.sh
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(tools.gpu_session_host_mode PROPERTIES LABELS sim TIMEOUT 60)
