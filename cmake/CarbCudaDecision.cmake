# The CARB_CUDA decision and the cuBLAS header lookup (cmake/CarbCuda.cmake uses them; tests/cmake
# checks both in script mode).

# What to do, from the option and what was found: a pure function, so tests/cmake can check every
# case. `missing` says what was not found (empty when both were). Sets `out_decision` to ON, OFF
# or ERROR and `out_message` to the line the configure prints (or fails with).
function(carb_cuda_decision mode toolkit_found cudnn_found missing out_decision out_message)
  string(TOUPPER "${mode}" mode)
  if(mode STREQUAL "OFF")
    set(decision OFF)
    set(text "CUDA backend: off (CARB_CUDA=OFF)")
  elseif(NOT mode STREQUAL "AUTO" AND NOT mode STREQUAL "ON")
    set(decision ERROR)
    set(text "CARB_CUDA must be AUTO, ON or OFF, not '${mode}'")
  elseif(toolkit_found AND cudnn_found)
    set(decision ON)
    set(text "CUDA backend: on")
  elseif(mode STREQUAL "ON")
    set(decision ERROR)
    string(CONCAT text "CARB_CUDA=ON, but ${missing}. Install the CUDA toolkit and cuDNN 9, "
                  "point CUDAToolkit_ROOT / CUDNN_ROOT at them, or configure with -DCARB_CUDA=OFF")
  else()
    set(decision OFF)
    set(text "CUDA backend: off (${missing}; CARB_CUDA=AUTO skips it)")
  endif()
  set(${out_decision} ${decision} PARENT_SCOPE)
  set(${out_message} "${text}" PARENT_SCOPE)
endfunction()

# The first folder of `include_dirs` that holds cublas_v2.h; empty when none does. FindCUDAToolkit
# gives a list there: CMake 3.31.8 and later (4.x too) add nvcc's own system folder (include/cccl
# with CUDA 13) to CUDAToolkit_INCLUDE_DIRS, so the folders are searched one by one.
function(carb_find_cublas_header include_dirs out_dir)
  set(found "")
  foreach(dir IN LISTS include_dirs)
    if(EXISTS "${dir}/cublas_v2.h")
      set(found "${dir}")
      break()
    endif()
  endforeach()
  set(${out_dir} "${found}" PARENT_SCOPE)
endfunction()
