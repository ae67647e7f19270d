# The PyTorch backend's build switch. CARB_TORCH is AUTO (build it when libtorch's CMake package
# is found: Debian's libtorch-dev, or a PyTorch wheel's share/cmake via CMAKE_PREFIX_PATH), ON
# (fail the configure without it) or OFF. Sets CARB_WITH_TORCH and, when it is ON, TORCH_LIBRARIES.
set(CARB_TORCH AUTO CACHE STRING "Build the PyTorch (libtorch) backend: AUTO (when libtorch is found), ON or OFF")
set_property(CACHE CARB_TORCH PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${CARB_TORCH}" carb_torch_mode)
set(CARB_WITH_TORCH OFF)
# libtorch 1.13's headers do not parse with clang 14 in C++20 (c10::IValue is incomplete where a
# std::vector<IValue> is instantiated): AUTO leaves the backend out of such a build.
set(carb_torch_compiler_ok TRUE)
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 15)
  set(carb_torch_compiler_ok FALSE)
endif()
if(carb_torch_mode STREQUAL "AUTO" AND NOT carb_torch_compiler_ok)
  message(STATUS "PyTorch backend left out: clang ${CMAKE_CXX_COMPILER_VERSION} cannot parse "
                 "libtorch 1.13's headers in C++20 (GCC can)")
elseif(NOT carb_torch_mode STREQUAL "OFF")
  find_package(Torch CONFIG QUIET)
  if(Torch_FOUND)
    set(CARB_WITH_TORCH ON)
    message(STATUS "PyTorch backend: libtorch ${Torch_VERSION} (${TORCH_INSTALL_PREFIX})")
  elseif(carb_torch_mode STREQUAL "ON")
    message(FATAL_ERROR "CARB_TORCH=ON but libtorch was not found: apt-get install libtorch-dev, "
                        "or point CMAKE_PREFIX_PATH at a PyTorch wheel's share/cmake")
  else()
    message(STATUS "PyTorch backend left out: libtorch not found (apt-get install libtorch-dev)")
  endif()
endif()
