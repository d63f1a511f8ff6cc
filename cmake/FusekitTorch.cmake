# Finds PyTorch for the operator library (torch/) by asking the Python interpreter that has it, and
# picks GPU targets for a build meant to run on this machine. Included before FusekitGpu.cmake.
#
# The operator library uses PyTorch's stable C ABI and needs only torch's headers and shared
# libraries, so this probes `import torch` instead of calling find_package(Torch), whose CMake
# package drags in CUDA/cuDNN discovery and ATen compile flags the stable ABI does not need.
#
#   Python_EXECUTABLE       the interpreter whose torch is used (default: python3 on the PATH; pip
#                           builds set it)
#   FUSEKIT_CUDA_ARCHS      (environment) CUDA targets, e.g. "90a" or "80;90a"; overrides the
#                           default below. CMAKE_CUDA_ARCHITECTURES given on the command line wins.
#   FUSEKIT_HIP_ARCHS       (environment) the same for HIP, e.g. "gfx942"
# Without those, a machine whose torch sees GPUs builds for exactly those GPUs (CUDA capability
# 9.0 -> "90a"; HIP: the gcnArchName); otherwise FusekitGpu.cmake's defaults apply.
#
# Sets FUSEKIT_TORCH_VERSION, FUSEKIT_TORCH_INCLUDE_DIR, FUSEKIT_TORCH_LIBRARY_DIR,
# FUSEKIT_TORCH_CUDA (torch.version.cuda or "") and FUSEKIT_TORCH_HIP (torch.version.hip or "").

find_package(Python COMPONENTS Interpreter REQUIRED)

set(_fusekit_torch_probe [=[
import json, os
import torch
info = {
    "version": torch.__version__.split("+")[0],
    "include": os.path.join(os.path.dirname(torch.__file__), "include"),
    "lib": os.path.join(os.path.dirname(torch.__file__), "lib"),
    "cuda": torch.version.cuda or "",
    "hip": getattr(torch.version, "hip", None) or "",
    "archs": [],
}
try:
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            if info["hip"]:
                arch = torch.cuda.get_device_properties(i).gcnArchName.split(":")[0]
            else:
                major, minor = torch.cuda.get_device_capability(i)
                arch = f"{major}{minor}" + ("a" if major >= 9 else "")
            if arch not in info["archs"]:
                info["archs"].append(arch)
except Exception:
    pass
print(json.dumps(info))
]=])
execute_process(COMMAND "${Python_EXECUTABLE}" -c "${_fusekit_torch_probe}"
                OUTPUT_VARIABLE _fusekit_torch_json ERROR_VARIABLE _fusekit_torch_err
                RESULT_VARIABLE _fusekit_torch_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _fusekit_torch_rc EQUAL 0)
  message(FATAL_ERROR "FUSEKIT_TORCH=ON needs PyTorch (>= 2.10) importable by ${Python_EXECUTABLE}:"
                      "\n${_fusekit_torch_err}")
endif()
string(REGEX MATCH "{.*}" _fusekit_torch_json "${_fusekit_torch_json}")  # skip any warnings
string(JSON FUSEKIT_TORCH_VERSION GET "${_fusekit_torch_json}" version)
string(JSON FUSEKIT_TORCH_INCLUDE_DIR GET "${_fusekit_torch_json}" include)
string(JSON FUSEKIT_TORCH_LIBRARY_DIR GET "${_fusekit_torch_json}" lib)
string(JSON FUSEKIT_TORCH_CUDA GET "${_fusekit_torch_json}" cuda)
string(JSON FUSEKIT_TORCH_HIP GET "${_fusekit_torch_json}" hip)
string(JSON _fusekit_arch_count LENGTH "${_fusekit_torch_json}" archs)
set(_fusekit_local_archs)
if(_fusekit_arch_count GREATER 0)
  math(EXPR _last "${_fusekit_arch_count} - 1")
  foreach(i RANGE ${_last})
    string(JSON _arch GET "${_fusekit_torch_json}" archs ${i})
    list(APPEND _fusekit_local_archs "${_arch}")
  endforeach()
endif()
if(FUSEKIT_TORCH_VERSION VERSION_LESS 2.10)
  message(FATAL_ERROR "FUSEKIT_TORCH=ON needs PyTorch >= 2.10 (its stable ABI); "
                      "${Python_EXECUTABLE} has ${FUSEKIT_TORCH_VERSION}")
endif()
message(STATUS "fusekit: PyTorch ${FUSEKIT_TORCH_VERSION} (CUDA '${FUSEKIT_TORCH_CUDA}', "
               "HIP '${FUSEKIT_TORCH_HIP}', local GPUs '${_fusekit_local_archs}') at "
               "${FUSEKIT_TORCH_INCLUDE_DIR}")

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  if(NOT "$ENV{FUSEKIT_CUDA_ARCHS}" STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "$ENV{FUSEKIT_CUDA_ARCHS}")
  elseif(_fusekit_local_archs AND FUSEKIT_TORCH_CUDA)
    set(CMAKE_CUDA_ARCHITECTURES "${_fusekit_local_archs}")
  endif()
endif()
if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
  if(NOT "$ENV{FUSEKIT_HIP_ARCHS}" STREQUAL "")
    set(CMAKE_HIP_ARCHITECTURES "$ENV{FUSEKIT_HIP_ARCHS}")
  elseif(_fusekit_local_archs AND FUSEKIT_TORCH_HIP)
    set(CMAKE_HIP_ARCHITECTURES "${_fusekit_local_archs}")
  endif()
endif()
