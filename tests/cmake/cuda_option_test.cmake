# The CARB_CUDA switch's decision for every case (cmake -P, no toolkit needed): AUTO builds the
# backend only when the toolkit and cuDNN are found and otherwise skips it with the reason, ON
# fails the configure with the reason, OFF never builds it, anything else is an error.
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/CarbCudaDecision.cmake)

set(failures 0)
function(expect mode toolkit cudnn missing want_decision want_fragment)
  carb_cuda_decision("${mode}" ${toolkit} ${cudnn} "${missing}" decision text)
  string(FIND "${text}" "${want_fragment}" at)
  if(NOT decision STREQUAL want_decision OR at EQUAL -1)
    message(SEND_ERROR "CARB_CUDA=${mode} toolkit=${toolkit} cudnn=${cudnn}: got ${decision} "
                       "'${text}', want ${want_decision} containing '${want_fragment}'")
  endif()
endfunction()

set(no_cudnn "cuDNN was not found (cudnn.h: NOTFOUND)")
expect(AUTO TRUE TRUE "" ON "CUDA backend: on")
expect(auto TRUE TRUE "" ON "CUDA backend: on")
expect(AUTO TRUE FALSE "${no_cudnn}" OFF "off (${no_cudnn}; CARB_CUDA=AUTO skips it)")
expect(AUTO FALSE FALSE "the CUDA toolkit was not found" OFF "the CUDA toolkit was not found")
expect(ON TRUE TRUE "" ON "CUDA backend: on")
expect(ON TRUE FALSE "${no_cudnn}" ERROR "CARB_CUDA=ON, but ${no_cudnn}")
expect(ON FALSE FALSE "the CUDA toolkit was not found" ERROR "-DCARB_CUDA=OFF")
expect(OFF TRUE TRUE "" OFF "CARB_CUDA=OFF")
expect(OFF FALSE FALSE "whatever" OFF "CARB_CUDA=OFF")
expect(MAYBE TRUE TRUE "" ERROR "must be AUTO, ON or OFF, not 'MAYBE'")

# The cuBLAS header lookup over FindCUDAToolkit's include folders, which CMake 3.31.8+ and 4.x
# make a list (nvcc's include/cccl beside the toolkit's include with CUDA 13): folders made here.
set(root "${CMAKE_CURRENT_BINARY_DIR}/carb-cublas-lookup")
file(REMOVE_RECURSE "${root}")
file(MAKE_DIRECTORY "${root}/cuda/include/cccl" "${root}/empty")
file(WRITE "${root}/cuda/include/cublas_v2.h" "")
function(expect_cublas dirs want)
  carb_find_cublas_header("${dirs}" found)
  if(NOT found STREQUAL want)
    message(SEND_ERROR "cublas_v2.h lookup in '${dirs}': got '${found}', want '${want}'")
  endif()
endfunction()
expect_cublas("${root}/cuda/include" "${root}/cuda/include")
# The list CMake 4 gives: the header's folder second, after cccl.
expect_cublas("${root}/cuda/include/cccl;${root}/cuda/include" "${root}/cuda/include")
expect_cublas("${root}/cuda/include;${root}/cuda/include/cccl" "${root}/cuda/include")
expect_cublas("${root}/empty;${root}/cuda/include/cccl" "")
expect_cublas("" "")
file(REMOVE_RECURSE "${root}")
