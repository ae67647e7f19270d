# The Python module's build switch. CARB_PYTHON is AUTO (build `import carb` when pybind11 and
# Python 3's headers are found: Debian's pybind11-dev and python3-dev), ON (fail the configure
# without them) or OFF. AUTO leaves it out of a sanitizer build: an ASan-instrumented module
# cannot load into an uninstrumented python. CARB_PYTHON_EXECUTABLE is the interpreter it is
# built for (default Debian's /usr/bin/python3, not whichever python3 is first on PATH). Sets
# CARB_WITH_PYTHON.
set(CARB_PYTHON AUTO CACHE STRING "Build the Python module: AUTO (when pybind11 and Python 3 dev are found), ON or OFF")
set_property(CACHE CARB_PYTHON PROPERTY STRINGS AUTO ON OFF)
if(EXISTS /usr/bin/python3)
  set(carb_default_python /usr/bin/python3)
else()
  set(carb_default_python "")
endif()
set(CARB_PYTHON_EXECUTABLE "${carb_default_python}" CACHE FILEPATH
    "The Python interpreter the module is built for")
string(TOUPPER "${CARB_PYTHON}" carb_python_mode)
set(CARB_WITH_PYTHON OFF)
if(carb_python_mode STREQUAL "AUTO" AND CARB_SANITIZE)
  message(STATUS "Python module left out: an instrumented module (CARB_SANITIZE) cannot load "
                 "into an uninstrumented python")
elseif(NOT carb_python_mode STREQUAL "OFF")
  if(CARB_PYTHON_EXECUTABLE)
    set(Python3_EXECUTABLE "${CARB_PYTHON_EXECUTABLE}")
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  if(Python3_FOUND)
    find_package(pybind11 2.6 CONFIG QUIET)
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    set(CARB_WITH_PYTHON ON)
    message(STATUS "Python module: pybind11 ${pybind11_VERSION} for ${Python3_EXECUTABLE} "
                   "(${Python3_VERSION})")
  elseif(carb_python_mode STREQUAL "ON")
    message(FATAL_ERROR "CARB_PYTHON=ON but pybind11 or Python 3's headers were not found for "
                        "'${CARB_PYTHON_EXECUTABLE}': apt-get install pybind11-dev python3-dev, "
                        "or set CARB_PYTHON_EXECUTABLE")
  else()
    message(STATUS "Python module left out: pybind11 or Python 3's headers not found for "
                   "'${CARB_PYTHON_EXECUTABLE}' (apt-get install pybind11-dev python3-dev)")
  endif()
endif()
