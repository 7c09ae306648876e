# NCCL, for expert parallelism (src/ep, issue 39): optional. MOEKIT_NCCL = AUTO (default) builds
# the EP library (moekit_ep) when NCCL is found, ON requires it, OFF never looks. Where it is
# looked for: NCCL_ROOT (variable or environment), the CUDA toolkit, the system, and the
# nvidia-nccl-cu13 wheel of the build's Python (the VIRTUAL_ENV's, else python3's): the NCCL that
# torch's CUDA 13 wheels install, so `pip install nvidia-nccl-cu13` provides it on a fresh machine.
# Sets MOEKIT_HAS_NCCL, MOEKIT_NCCL_INCLUDE_DIR and MOEKIT_NCCL_LIBRARY.
set(MOEKIT_NCCL AUTO CACHE STRING "Build the NCCL expert-parallel library: AUTO, ON or OFF")
set_property(CACHE MOEKIT_NCCL PROPERTY STRINGS AUTO ON OFF)
set(MOEKIT_HAS_NCCL OFF)
if(NOT MOEKIT_NCCL STREQUAL "OFF")
  set(_moekit_nccl_hints "")
  if(NCCL_ROOT)
    list(APPEND _moekit_nccl_hints "${NCCL_ROOT}")
  endif()
  if(DEFINED ENV{NCCL_ROOT})
    list(APPEND _moekit_nccl_hints "$ENV{NCCL_ROOT}")
  endif()
  if(DEFINED ENV{VIRTUAL_ENV} AND EXISTS "$ENV{VIRTUAL_ENV}/bin/python")
    set(_moekit_nccl_python "$ENV{VIRTUAL_ENV}/bin/python")
  else()
    find_program(_moekit_nccl_python NAMES python3)
  endif()
  if(_moekit_nccl_python)
    execute_process(
      COMMAND "${_moekit_nccl_python}" -c
              "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0] if s else '')"
      OUTPUT_VARIABLE _moekit_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_moekit_nccl_wheel)
      list(APPEND _moekit_nccl_hints "${_moekit_nccl_wheel}")
    endif()
  endif()
  find_path(MOEKIT_NCCL_INCLUDE_DIR nccl.h HINTS ${_moekit_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  if(MOEKIT_NCCL_INCLUDE_DIR)
    # The library of the same installation as the header (the wheel ships libnccl.so.2 without
    # the unversioned link).
    get_filename_component(_moekit_nccl_root "${MOEKIT_NCCL_INCLUDE_DIR}" DIRECTORY)
    find_library(MOEKIT_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS "${_moekit_nccl_root}"
                 PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu NO_DEFAULT_PATH)
  endif()
  if(MOEKIT_NCCL_INCLUDE_DIR AND MOEKIT_NCCL_LIBRARY)
    set(MOEKIT_HAS_NCCL ON)
    message(STATUS "moekit: NCCL ${MOEKIT_NCCL_LIBRARY} (headers ${MOEKIT_NCCL_INCLUDE_DIR}): building moekit_ep")
  elseif(MOEKIT_NCCL STREQUAL "ON")
    message(FATAL_ERROR "moekit: MOEKIT_NCCL=ON but NCCL was not found (set NCCL_ROOT, or pip install nvidia-nccl-cu13 into the build's Python)")
  else()
    message(STATUS "moekit: NCCL not found, the expert-parallel library is skipped (pip install nvidia-nccl-cu13, or NCCL_ROOT)")
  endif()
endif()
