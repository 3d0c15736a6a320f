# Helpers that build coda's libraries and tools in one of two link modes:
#  - default: link the shared libMLIR.so / libLLVM.so from the LLVM install
#    (fast incremental links for development);
#  - CODA_STATIC_TOOLS=ON: link every tool statically against the MLIR/LLVM
#    archives so that it runs on a machine that has no LLVM installed.

set_property(GLOBAL PROPERTY CODA_LIBS "")

# coda_add_library(name src... [DEPENDS tablegen-targets...] [LINK_LIBS coda-libs...])
function(coda_add_library name)
  cmake_parse_arguments(ARG "" "" "DEPENDS;LINK_LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  add_dependencies(${name} mlir-headers ${ARG_DEPENDS})
  target_link_libraries(${name} PUBLIC ${ARG_LINK_LIBS})
  if(CODA_STATIC_TOOLS)
    target_link_libraries(${name} PUBLIC CodaStaticMLIR)
  else()
    target_link_libraries(${name} PUBLIC MLIR LLVM)
  endif()
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${CODA_SOURCE_DIR}/include>
    $<BUILD_INTERFACE:${CODA_BINARY_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  # Users of coda's headers need MLIR's and LLVM's.
  target_include_directories(${name} SYSTEM PUBLIC
    ${MLIR_INCLUDE_DIRS} ${LLVM_INCLUDE_DIRS})
  set_property(GLOBAL APPEND PROPERTY CODA_LIBS ${name})
  install(TARGETS ${name} EXPORT CodaTargets
    ARCHIVE DESTINATION lib LIBRARY DESTINATION lib)
endfunction()

# The MLIR/LLVM archives a statically linked tool is built from. Test, C-API and
# other projects' tool archives are left out: nothing in coda uses them.
function(_coda_static_archives out)
  file(GLOB mlir_archives "${LLVM_LIBRARY_DIR}/libMLIR*.a")
  file(GLOB llvm_archives "${LLVM_LIBRARY_DIR}/libLLVM*.a")
  set(keep "")
  foreach(a ${mlir_archives} ${llvm_archives})
    get_filename_component(n ${a} NAME)
    if(NOT n MATCHES "Test|CAPI|BOLT|Exegesis|Polly|TableGen|Tblgen")
      list(APPEND keep ${a})
    endif()
  endforeach()
  set(${out} ${keep} PARENT_SCOPE)
endfunction()

# In static mode, every coda library links CodaStaticMLIR, the MLIR/LLVM
# archives in one group, so that the group follows all of coda's libraries on
# the link line of a tool or shared library.
if(CODA_STATIC_TOOLS)
  _coda_static_archives(archives)
  find_library(CODA_ZSTD NAMES libzstd.so.1 zstd REQUIRED)
  add_library(CodaStaticMLIR INTERFACE)
  target_link_libraries(CodaStaticMLIR INTERFACE
    -Wl,--start-group ${archives} -Wl,--end-group
    ${CODA_ZSTD} -lz -lrt -ldl -lm -lpthread)
  install(TARGETS CodaStaticMLIR EXPORT CodaTargets)
endif()

function(_coda_link_static_mlir target)
  if(CODA_STATIC_TOOLS)
    target_link_libraries(${target} PRIVATE CodaStaticMLIR -Wl,--gc-sections)
  endif()
endfunction()

# coda_add_tool(name src... [LINK_LIBS coda-libs...])
function(coda_add_tool name)
  cmake_parse_arguments(ARG "" "" "LINK_LIBS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CODA_BINARY_DIR}/bin)
  target_link_libraries(${name} PRIVATE ${ARG_LINK_LIBS})
  _coda_link_static_mlir(${name})
  install(TARGETS ${name} RUNTIME DESTINATION bin)
endfunction()

# coda_add_shared_library(name src... EXPORTS version-script [LINK_LIBS ...]):
# a shared library; in static mode it carries MLIR and LLVM inside, so it
# loads on machines without them, and exports only what the version script
# lists. Linked against libMLIR.so, it exports everything: MLIR's TypeIDs of
# templates (op traits) are weak symbols that must resolve to libMLIR.so's,
# or the verifier does not see coda's terminators as terminators.
function(coda_add_shared_library name)
  cmake_parse_arguments(ARG "" "EXPORTS" "LINK_LIBS" ${ARGN})
  add_library(${name} SHARED ${ARG_UNPARSED_ARGUMENTS})
  set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CODA_BINARY_DIR}/lib)
  target_link_libraries(${name} PRIVATE ${ARG_LINK_LIBS})
  if(CODA_STATIC_TOOLS)
    target_link_libraries(${name} PRIVATE
      -Wl,--version-script=${ARG_EXPORTS} -Wl,--exclude-libs,ALL)
  endif()
  set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${ARG_EXPORTS})
  _coda_link_static_mlir(${name})
  install(TARGETS ${name} LIBRARY DESTINATION lib)
endfunction()

if(CODA_STATIC_TOOLS)
  add_compile_options(-ffunction-sections -fdata-sections)
endif()
