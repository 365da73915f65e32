# The Python package lms (python/, issue 28) with real Python against this
# build's liblms.so on sim (included by tests/CMakeLists.txt):
#   python.lms      the API, lms.limit and where the library is found (test_lms.py)
#   python.torch    lms.torch (test_torch.py), run by the first python3 with torch
#                   (Debian's python3-torch is /usr/bin/python3's), else by python3
#                   with the torch parts skipped, saying why
#   python.install  pip install ./python into a folder, and make install's
#                   package finding the library installed with it (test_install.py),
#                   run by the first python3 with pip, setuptools and wheel (what
#                   an offline pip install needs), else by python3 with that part
#                   skipped, saying why
# Unsanitized builds only: an ASan-instrumented liblms.so cannot be loaded into
# a python that is not (as the ctypes probe of malloc isolation).
if(LMS_SANITIZE)
  return()
endif()
find_program(LMS_PYTHON3 python3)
if(NOT LMS_PYTHON3)
  message(STATUS "lms: no python3: the Python package is not tested")
  return()
endif()
set(dir ${CMAKE_CURRENT_SOURCE_DIR}/python)
set(env "LMS_BACKEND=sim;LMS_SIM_MEMORY=64MiB;LMS_DEVICE_LIMIT=8MiB;LMS_HOST_LIMIT=64MiB"
        "LMS_LIBRARY=$<TARGET_FILE:lms>;PYTHONPATH=${CMAKE_SOURCE_DIR}/python:${dir}"
        "LMS_SOURCE_DIR=${CMAKE_SOURCE_DIR};LMS_BUILD_DIR=${CMAKE_BINARY_DIR}"
        "CMAKE=${CMAKE_COMMAND};LMS_INSTALL_PYTHONDIR=${LMS_INSTALL_PYTHONDIR}"
        "PYTHONDONTWRITEBYTECODE=1")
add_test(NAME python.lms COMMAND ${LMS_PYTHON3} ${dir}/test_lms.py)
# the first of python3 and Debian's own that has the modules $1 names, else python3
set(first_with [=[
for py in "$2" /usr/bin/python3; do
  "$py" -c 'import importlib.util as u, sys; sys.exit(not all(map(u.find_spec, sys.argv[1:])))' \
    $1 &&
    exec "$py" "$0"
done
exec "$2" "$0"]=])
add_test(NAME python.torch COMMAND sh -c "${first_with}" ${dir}/test_torch.py torch ${LMS_PYTHON3})
add_test(NAME python.install COMMAND sh -c "${first_with}" ${dir}/test_install.py
                                     "pip setuptools wheel" ${LMS_PYTHON3})
set_tests_properties(python.lms python.torch python.install PROPERTIES LABELS sim TIMEOUT 300
                     ENVIRONMENT "${env}")
