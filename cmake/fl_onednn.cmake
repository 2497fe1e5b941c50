# cmake/fl_onednn.cmake — the oneDNN path of trainfast's CPU backend (trainer/cpu/cpu_onednn*.c).
# FL_ONEDNN=AUTO (default: use libdnnl when found), ON (fail without it) or OFF (reference layers
# only). Finds the C API header (dnnl.h, Debian libdnnl-dev 2.x) and libdnnl, adds the sources to
# tf_core with FL_HAVE_ONEDNN, and links OpenMP (oneDNN's Debian build threads with libgomp; the
# backend sets its thread count with omp_set_num_threads). Included from trainer/CMakeLists.txt
# after tf_core is defined.
set(FL_ONEDNN "AUTO" CACHE STRING "CPU backend on oneDNN (libdnnl-dev): AUTO, ON or OFF")
set_property(CACHE FL_ONEDNN PROPERTY STRINGS AUTO ON OFF)
if(NOT FL_ONEDNN MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "FL_ONEDNN must be AUTO, ON or OFF (got '${FL_ONEDNN}')")
endif()

set(FL_HAVE_ONEDNN OFF)
if(NOT FL_ONEDNN STREQUAL "OFF")
  find_path(DNNL_INCLUDE_DIR NAMES dnnl.h PATH_SUFFIXES oneapi/dnnl)
  find_library(DNNL_LIBRARY NAMES dnnl)
  find_package(OpenMP COMPONENTS C QUIET)
  if(DNNL_INCLUDE_DIR AND DNNL_LIBRARY AND OpenMP_C_FOUND)
    file(STRINGS "${DNNL_INCLUDE_DIR}/dnnl_version.h" _dnnl_v REGEX "define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
           DNNL_VERSION "${_dnnl_v}")
    if(DNNL_VERSION VERSION_LESS 2.3 OR NOT DNNL_VERSION VERSION_LESS 3.0)
      set(_dnnl_why "oneDNN ${DNNL_VERSION} found, the backend needs the 2.x C API (2.3 or later)")
    else()
      set(FL_HAVE_ONEDNN ON)
    endif()
  else()
    set(_dnnl_why "libdnnl-dev not found (dnnl.h: ${DNNL_INCLUDE_DIR}, libdnnl: ${DNNL_LIBRARY}, OpenMP: ${OpenMP_C_FOUND})")
  endif()
  if(NOT FL_HAVE_ONEDNN AND FL_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "FL_ONEDNN=ON but ${_dnnl_why}")
  endif()
endif()

if(FL_HAVE_ONEDNN)
  target_sources(tf_core PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/cpu/cpu_onednn.c
                                 ${CMAKE_CURRENT_SOURCE_DIR}/cpu/cpu_onednn_bn.c
                                 ${CMAKE_CURRENT_SOURCE_DIR}/cpu/cpu_onednn_plan.c)
  target_include_directories(tf_core PRIVATE ${DNNL_INCLUDE_DIR})
  target_compile_definitions(tf_core PUBLIC FL_HAVE_ONEDNN=1)
  target_link_libraries(tf_core PUBLIC ${DNNL_LIBRARY} OpenMP::OpenMP_C)
  message(STATUS "  oneDNN ${DNNL_VERSION} (${DNNL_LIBRARY}): trainfast's CPU backend runs on oneDNN "
                 "(--cpu-backend onednn, the default; reference layers with --cpu-backend reference)")
elseif(FL_ONEDNN STREQUAL "OFF")
  message(STATUS "  oneDNN: disabled (FL_ONEDNN=OFF): trainfast's CPU backend uses its reference layers")
else()
  message(STATUS "  oneDNN: ${_dnnl_why}: trainfast's CPU backend uses its reference layers "
                 "(slower; install libdnnl-dev for the oneDNN path)")
endif()
