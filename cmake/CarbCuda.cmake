# The CUDA backend's build switch. CARB_CUDA is AUTO (build it when the CUDA toolkit and cuDNN 9
# are found, skip it otherwise), ON (fail the configure without them) or OFF. Sets CARB_WITH_CUDA
# and, when it is ON, the imported target carb::cudnn; CUDA::cudart comes from FindCUDAToolkit.

include(${CMAKE_CURRENT_LIST_DIR}/CarbCudaDecision.cmake)

# cuDNN's major version from cudnn_version.h in `include_dir`; empty when unreadable.
function(carb_cudnn_major include_dir out_major)
  set(major "")
  if(EXISTS "${include_dir}/cudnn_version.h")
    file(STRINGS "${include_dir}/cudnn_version.h" line REGEX "^#define CUDNN_MAJOR [0-9]+")
    string(REGEX REPLACE "^#define CUDNN_MAJOR ([0-9]+).*" "\\1" major "${line}")
  endif()
  set(${out_major} "${major}" PARENT_SCOPE)
endfunction()

set(CARB_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when the toolkit and cuDNN 9 are found), ON or OFF")
set_property(CACHE CARB_CUDA PROPERTY STRINGS AUTO ON OFF)

set(carb_toolkit_found FALSE)
set(carb_cudnn_found FALSE)
set(carb_missing "")
string(TOUPPER "${CARB_CUDA}" carb_cuda_mode)
if(NOT carb_cuda_mode STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart)
    set(carb_toolkit_found TRUE)
    # cuDNN: CUDNN_ROOT (variable or environment), CUDNN_PATH, then the toolkit's own folders
    # (where the development machines have it). A pip wheel's folder (nvidia/cudnn) has only
    # libcudnn.so.9, hence that name too.
    find_path(CARB_CUDNN_INCLUDE_DIR cudnn.h
      HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} $ENV{CUDNN_PATH} ${CUDAToolkit_INCLUDE_DIRS}
            ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES include)
    find_library(CARB_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
      HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} $ENV{CUDNN_PATH} ${CUDAToolkit_LIBRARY_DIR}
            ${CUDAToolkit_LIBRARY_ROOT}
      PATH_SUFFIXES lib lib64)
    carb_cudnn_major("${CARB_CUDNN_INCLUDE_DIR}" carb_cudnn_major_found)
    carb_find_cublas_header("${CUDAToolkit_INCLUDE_DIRS}" carb_cublas_include_dir)
    if(NOT CARB_CUDNN_INCLUDE_DIR OR NOT CARB_CUDNN_LIBRARY)
      set(carb_missing "cuDNN was not found (cudnn.h: ${CARB_CUDNN_INCLUDE_DIR}, library: ${CARB_CUDNN_LIBRARY})")
    elseif(NOT EXISTS "${CARB_CUDNN_INCLUDE_DIR}/cudnn_version.h")
      set(carb_missing "cuDNN was not found (no cudnn_version.h in ${CARB_CUDNN_INCLUDE_DIR})")
    elseif(NOT carb_cudnn_major_found STREQUAL "9")
      set(carb_missing "cuDNN 9 was not found (${CARB_CUDNN_INCLUDE_DIR}/cudnn_version.h says major '${carb_cudnn_major_found}')")
    elseif(NOT carb_cublas_include_dir)
      set(carb_missing "cuBLAS headers (cublas_v2.h) were not found in ${CUDAToolkit_INCLUDE_DIRS}")
    else()
      set(carb_cudnn_found TRUE)
    endif()
  else()
    set(carb_missing "the CUDA toolkit was not found (FindCUDAToolkit: no nvcc or libcudart)")
  endif()
endif()

carb_cuda_decision("${CARB_CUDA}" ${carb_toolkit_found} ${carb_cudnn_found} "${carb_missing}"
                   carb_cuda_decision_result carb_cuda_message)
if(carb_cuda_decision_result STREQUAL "ERROR")
  message(FATAL_ERROR "${carb_cuda_message}")
endif()
message(STATUS "${carb_cuda_message}")
set(CARB_WITH_CUDA ${carb_cuda_decision_result})

if(CARB_WITH_CUDA AND NOT TARGET carb::cudnn)
  add_library(carb::cudnn UNKNOWN IMPORTED)
  set_target_properties(carb::cudnn PROPERTIES
    IMPORTED_LOCATION "${CARB_CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CARB_CUDNN_INCLUDE_DIR}")
  message(STATUS "CUDA ${CUDAToolkit_VERSION} at ${CUDAToolkit_LIBRARY_DIR}; cuDNN ${CARB_CUDNN_LIBRARY}")
endif()
