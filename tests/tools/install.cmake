# lms's version, as a user asks for it: lms-info prints the library's
# (lms_version(), include/lms.h's LMS_VERSION), which is project()'s version.
string(REPLACE "." "\\." lms_version_re ${PROJECT_VERSION})
add_test(NAME tools.version_table COMMAND lms-info)
set_tests_properties(tools.version_table PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB"
  PASS_REGULAR_EXPRESSION "^lms version +${lms_version_re}\n")
add_test(NAME tools.version_json COMMAND lms-info --json)
set_tests_properties(tools.version_json PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB"
  PASS_REGULAR_EXPRESSION "^{\"tool\":\"lms-info\",\"version\":\"${lms_version_re}\",")

# make install's package, used as a user would (tests/tools/install_consumers.sh):
# installed into a temporary prefix, examples/hello built against it with
# pkg-config and with find_package(lms), both run on sim; the SONAME checked.
# Unsanitized builds only: a program linked with an ASan-instrumented
# liblms.so but not built with ASan cannot start.
if(NOT LMS_SANITIZE)
  add_test(NAME tools.install
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/install_consumers.sh ${CMAKE_BINARY_DIR}
                   ${CMAKE_SOURCE_DIR} ${PROJECT_VERSION} ${CMAKE_CURRENT_BINARY_DIR}/install)
  set_tests_properties(tools.install PROPERTIES LABELS sim TIMEOUT 300)
endif()
