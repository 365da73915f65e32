# cmake/lms_pc.cmake — run by `cmake --install` (install(SCRIPT) in
# CMakeLists.txt, after an install(CODE) that sets lms_pc_in, lms_version,
# lms_libdir and lms_includedir from the configure): writes lms.pc from
# lms.pc.in for the prefix being installed to, which `--prefix` (make install
# PREFIX=) sets after the configure; a .pc written at configure time would name
# the configure's prefix. The paths are absolute, so that pkg-config drops
# -I/usr/include and -L/usr/lib for a system prefix as it does for any
# package's.
set(pc_prefix "${CMAKE_INSTALL_PREFIX}")
set(pc_version "${lms_version}")
foreach(d libdir includedir)
  if(IS_ABSOLUTE "${lms_${d}}")
    set(pc_${d} "${lms_${d}}")
  else()
    set(pc_${d} "\${prefix}/${lms_${d}}")
  endif()
endforeach()
if(IS_ABSOLUTE "${lms_libdir}")
  set(dest "$ENV{DESTDIR}${lms_libdir}/pkgconfig/lms.pc")
else()
  set(dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${lms_libdir}/pkgconfig/lms.pc")
endif()
message(STATUS "Installing: ${dest}")
configure_file("${lms_pc_in}" "${dest}" @ONLY)
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${dest}")
