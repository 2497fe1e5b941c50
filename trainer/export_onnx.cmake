# export_onnx.cmake — `trainfast export` (trainer/export_*.c): C code for the ONNX protobuf
# schema generated at build time by protoc-c from the onnx.proto of Debian's python3-onnx (the
# schema the checker we test with uses), serialised with libprotobuf-c. Without protoc-c,
# libprotobuf-c or onnx.proto the rest builds as before and `trainfast export` exits 2 saying
# what to install. Included from trainer/CMakeLists.txt after the trainfast target exists.
option(FL_ONNX_EXPORT "Build `trainfast export` (needs protoc-c, libprotobuf-c and python3-onnx)" ON)
find_program(FL_PROTOC_C protoc-c)
pkg_check_modules(PROTOBUFC IMPORTED_TARGET libprotobuf-c)
find_file(FL_ONNX_PROTO onnx.proto
  PATHS /usr/lib/python3/dist-packages/onnx /usr/local/lib/python3/dist-packages/onnx
  DOC "onnx.proto (proto2) of the python3-onnx package" NO_DEFAULT_PATH)

target_sources(trainfast PRIVATE export_cli.c)
if(FL_ONNX_EXPORT AND FL_PROTOC_C AND PROTOBUFC_FOUND AND FL_ONNX_PROTO AND EXISTS "${FL_ONNX_PROTO}")
  set(_onnx_gen ${CMAKE_CURRENT_BINARY_DIR}/onnx_gen)
  # protoc-c names its outputs after the .proto: onnx.pb-c.c / onnx.pb-c.h
  add_custom_command(
    OUTPUT ${_onnx_gen}/onnx.pb-c.c ${_onnx_gen}/onnx.pb-c.h
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_onnx_gen}
    COMMAND ${CMAKE_COMMAND} -E copy ${FL_ONNX_PROTO} ${_onnx_gen}/onnx.proto
    COMMAND ${FL_PROTOC_C} --proto_path=${_onnx_gen} --c_out=${_onnx_gen} ${_onnx_gen}/onnx.proto
    DEPENDS ${FL_ONNX_PROTO}
    COMMENT "protoc-c: ONNX schema (${FL_ONNX_PROTO}) -> C"
    VERBATIM)
  add_library(tf_onnx STATIC export_onnx.c export_onnx_graph.c export_onnx_plan.c
              ${_onnx_gen}/onnx.pb-c.c)
  # generated code: not ours to warn about
  set_source_files_properties(${_onnx_gen}/onnx.pb-c.c PROPERTIES COMPILE_OPTIONS "-w")
  target_include_directories(tf_onnx PUBLIC ${CMAKE_CURRENT_SOURCE_DIR} ${_onnx_gen})
  target_link_libraries(tf_onnx PUBLIC tf_core PkgConfig::PROTOBUFC)
  target_compile_definitions(tf_onnx PUBLIC TF_HAVE_ONNX=1)
  target_link_libraries(trainfast PRIVATE tf_onnx)
  set(TF_HAVE_ONNX ON CACHE INTERNAL "trainfast export built")
  message(STATUS "trainfast: ONNX export ON (protoc-c ${FL_PROTOC_C}, libprotobuf-c "
                 "${PROTOBUFC_VERSION}, schema ${FL_ONNX_PROTO})")
else()
  set(TF_HAVE_ONNX OFF CACHE INTERNAL "trainfast export built")
  if(NOT FL_ONNX_EXPORT)
    message(STATUS "trainfast: ONNX export OFF (FL_ONNX_EXPORT=OFF); `trainfast export` exits 2")
  else()
    message(STATUS "trainfast: ONNX export OFF (needs protoc-c, libprotobuf-c and onnx.proto: install "
                   "protobuf-c-compiler libprotobuf-c-dev python3-onnx); `trainfast export` exits 2")
  endif()
endif()
