# What `cmake --install` puts where.
#
# Default (a system or prefix install, what serving engines link against):
#   lib/libattnjit.so.<version> (+ SONAME link .so.<major>, dev link .so)
#   include/attnjit/*.h, *.hpp          the public C and C++ headers
#   bin/attnjit                         the CLI
#   lib/cmake/attnjit/                  find_package(attnjit) -> attnjit::attnjit
#   lib/pkgconfig/attnjit.pc            pkg-config --cflags --libs attnjit
#
# ATTNJIT_PYTHON_PACKAGE=ON (the wheel, pyproject.toml): libattnjit.so and the
# CLI go inside the `attnjit` package folder, where _library.py and
# __main__.py look for them; no headers or CMake files (a wheel is not a
# development install).
include(CMakePackageConfigHelpers)

if(ATTNJIT_PYTHON_PACKAGE)
  # scikit-build-core's install prefix is the wheel's platlib root. ctypes
  # opens the library by path, so one file under the plain name is all it
  # needs; the SONAME links are left out because a wheel (a zip) cannot hold
  # symlinks and would carry three copies.
  install(FILES $<TARGET_FILE:attnjit> DESTINATION attnjit RENAME libattnjit.so)
  if(TARGET attnjit_cli)
    install(TARGETS attnjit_cli RUNTIME DESTINATION attnjit/bin)
  endif()
  return()
endif()

install(TARGETS attnjit EXPORT attnjitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/attnjit
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
# base/'s public headers (errors, export macros, cache settings) go beside them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/base/include/attnjit
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
if(TARGET attnjit_cli)
  install(TARGETS attnjit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(ATTNJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attnjit)
install(EXPORT attnjitTargets NAMESPACE attnjit:: DESTINATION ${ATTNJIT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attnjitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/attnjitConfig.cmake INSTALL_DESTINATION ${ATTNJIT_CMAKE_DIR})
# 0.x: minor versions may break the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnjitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnjitConfig.cmake ${PROJECT_BINARY_DIR}/attnjitConfigVersion.cmake
  DESTINATION ${ATTNJIT_CMAKE_DIR})

# pkg-config: the prefix is derived from ${pcfiledir}, because `cmake --install
# --prefix P` picks the prefix after configuration, and trees get relocated.
file(RELATIVE_PATH ATTNJIT_PC_TO_PREFIX "/r/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/r")
string(REGEX REPLACE "/$" "" ATTNJIT_PC_TO_PREFIX "${ATTNJIT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/attnjit.pc.in ${PROJECT_BINARY_DIR}/attnjit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/attnjit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
