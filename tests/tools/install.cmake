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
