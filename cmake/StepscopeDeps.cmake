# External dependencies, found the standard CMake way.
#
#   zstd        pkg-config (PkgConfig::ZSTD)            required
#   Threads     Threads::Threads                        required
#   CUDA        find_package(CUDAToolkit): CUDA::cudart, CUDA::cupti, CUDA::nvtx3,
#               CUDA::cublas, CUDA::cublasLt; NCCL by find_path/find_library
#               (it ships no CMake config) as the imported target stepscope::nccl.
#
# Sets STEPSCOPE_HAVE_CUDA (ON/OFF) for the components.

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)

set(STEPSCOPE_HAVE_CUDA OFF)
if(NOT STEPSCOPE_CUDA STREQUAL "OFF")
  if(STEPSCOPE_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND)
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 90)
      endif()
      enable_language(CUDA)
      find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME
                PATH_SUFFIXES include)
      find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME
                   PATH_SUFFIXES lib lib64)
      if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND TARGET CUDA::cupti AND TARGET CUDA::cublasLt)
        add_library(stepscope::nccl UNKNOWN IMPORTED)
        set_target_properties(stepscope::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
                              INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
        set(STEPSCOPE_HAVE_CUDA ON)
      elseif(STEPSCOPE_CUDA STREQUAL "ON")
        message(FATAL_ERROR "STEPSCOPE_CUDA=ON but NCCL, CUPTI or cuBLASLt was not found")
      endif()
    elseif(STEPSCOPE_CUDA STREQUAL "ON")
      message(FATAL_ERROR "STEPSCOPE_CUDA=ON but no CUDA compiler was found")
    endif()
  endif()
endif()
