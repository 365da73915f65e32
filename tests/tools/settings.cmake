# docs/settings.md's table (the README's before issue 28, hence the name) is
# `lms-info --options --markdown`, the options table (LMS_OPTIONS in
# base/base.h) printed: the test fails when they differ, naming the command
# that regenerates the doc's copy.
add_test(NAME tools.readme_settings
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/readme_settings.sh
                 $<TARGET_FILE:lms-info> ${CMAKE_SOURCE_DIR}/docs/settings.md)
set_tests_properties(tools.readme_settings PROPERTIES LABELS sim TIMEOUT 60)

# `lms-info --options` resolves the sizes on the device, as lms_init does
# (swap_config_resolve): a limit from the environment, the defaults it moves,
# and a limit lms_init refuses, refused with lms_init's message.
add_test(NAME tools.options_resolved COMMAND lms-info --options)
set_tests_properties(tools.options_resolved PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB;LMS_DEVICE_LIMIT=32MiB;LMS_HOST_LIMIT=64MiB"
  PASS_REGULAR_EXPRESSION
  "LMS_DEVICE_LIMIT +32.00 MiB +env\nLMS_HOST_LIMIT +64.00 MiB +env\nLMS_VA_RESERVE +384.00 MiB +default")
add_test(NAME tools.options_refused COMMAND sh -c
  "out=$(\"$0\" --options 2>&1); rc=$?; echo \"$out\"; test $rc = 1 && echo \"$out\" | grep -q 'lms_init: the device limit 1.00 MiB (LMS_DEVICE_LIMIT) is less than one chunk'"
  $<TARGET_FILE:lms-info>)
set_tests_properties(tools.options_refused PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB;LMS_DEVICE_LIMIT=1MiB")

# lms-info says where lms would point an evicted chunk's addresses, and why
# (LMS_EVICTED; Note [Evicted mode] in swap/config.c), in its table, its JSON
# line and --options: auto is unmapped until a card has measured the host
# mode; a word that is not one of the choices is warned of, and auto kept.
set(evicted_auto "auto: host-mapped eviction not measured on a card yet")
add_test(NAME tools.evicted_table COMMAND lms-info)
set_tests_properties(tools.evicted_table PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB"
  PASS_REGULAR_EXPRESSION "\nevicted +unmapped \\(${evicted_auto}\\)\n")
add_test(NAME tools.evicted_json COMMAND lms-info --json)
set_tests_properties(tools.evicted_json PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB"
  PASS_REGULAR_EXPRESSION ",\"evicted\":\"unmapped\",\"evicted_why\":\"${evicted_auto}\"}\n")
add_test(NAME tools.evicted_bad_word COMMAND sh -c
  "out=$(\"$0\" --options 2>&1); rc=$?; echo \"$out\"; test $rc = 0 && echo \"$out\" | grep -q 'lms: warning: LMS_EVICTED=sideways is not valid' && echo \"$out\" | grep -Eq '^LMS_EVICTED +unmapped +${evicted_auto}$'"
  $<TARGET_FILE:lms-info>)
set_tests_properties(tools.evicted_bad_word PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB;LMS_EVICTED=sideways")

# LMS_EVICTED=host: sim maps host blocks, so lms starts in host mode, and
# lms-info's options and table say so, naming the setting.
add_test(NAME tools.evicted_host COMMAND sh -c
  "out=$(\"$0\" --options 2>&1); rc=$?; echo \"$out\"; test $rc = 0 && echo \"$out\" | grep -Eq '^LMS_EVICTED +host +LMS_EVICTED=host$' && \"$0\" | grep -q '^evicted  *host (LMS_EVICTED=host)$'"
  $<TARGET_FILE:lms-info>)
set_tests_properties(tools.evicted_host PROPERTIES LABELS sim TIMEOUT 60
  ENVIRONMENT "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB;LMS_EVICTED=host")
