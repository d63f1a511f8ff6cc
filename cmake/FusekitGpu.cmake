# Chooses the GPU backend (FUSEKIT_GPU) and configures targets that hold GPU sources.
#
# The .cu sources are one code base: compiled by nvcc as CUDA, or by the ROCm clang as HIP (their
# LANGUAGE property is switched to HIP). Sets FUSEKIT_GPU_BACKEND to CUDA, HIP or NONE.
#
# HIP toolchain discovery (CMake's HIP language; hipcc itself is never the compiler)
# ---------------------------------------------------------------------------------
# With AMD's ROCm in /opt/rocm, CMake finds everything itself. Debian 12's packages
# (`apt-get install hipcc libamdhip64-dev rocm-device-libs`: ROCm 5.2, CMake 3.25) need four
# things that CMake does not work out, and which _fusekit_find_hip_toolchain() below derives from
# hipcc / hipconfig, so that
#   cmake -S . -B build-hip -G Ninja -DFUSEKIT_GPU=HIP -DCMAKE_HIP_ARCHITECTURES="gfx90a;gfx1030"
# works with no other flag:
#   1. The compiler. CMake's default is `clang++` (Debian: clang 14, whose LLVM cannot read the
#      ROCm 5.2 device-library bitcode); hipcc uses /usr/bin/clang++-15. We take the clang that
#      hipcc runs (from `HIPCC_VERBOSE=1 hipcc --version`), else hipconfig --hipclangpath.
#      Override: -DCMAKE_HIP_COMPILER=/usr/bin/clang++-15 (or HIPCXX=...).
#   2. Where the ROCm "installation" is, for clang: --rocm-path=/usr (hipconfig --rocmpath).
#   3. The device libraries (ockl.bc, ocml.bc, ...): Debian puts them in
#      /usr/lib/<multiarch>/amdgcn/bitcode, not <rocm>/amdgcn/bitcode where clang looks, so
#      --hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode.
#   4. The HIP version: Debian ships no .hipVersion file for clang to read, so
#      --hip-version=5.2.21153 (hipconfig --version), as Debian's hipcc passes too.
#   2-4 are prepended to CMAKE_HIP_FLAGS (a normal variable, so -DCMAKE_HIP_FLAGS=... still adds
#   to them) and only when the layout needs them (no <rocm>/amdgcn/bitcode).
# In addition CMake 3.25 (Debian 12's) requires the hip-lang CMake package at
# <rocm root>/lib/cmake/hip-lang, while Debian installs it under /usr/lib/<multiarch>/cmake (newer
# CMake releases also search there), and that package, as CMake's compiler checks load it, cannot
# find its amd_comgr dependency and adds -isystem /usr/include, which breaks libstdc++'s
# #include_next <math.h>. So for that layout CMAKE_HIP_COMPILER_ROCM_ROOT points at a small
# forwarding package in the build tree (<build>/fusekit-rocm-root/lib/cmake/hip-lang/
# hip-lang-config.cmake: names the dependency directories, includes the real package, drops
# /usr/include); this works with newer CMake releases as well.
# Set FUSEKIT_HIP_AUTODETECT=OFF to skip all of this and configure the HIP language yourself.
include(CheckLanguage)

option(FUSEKIT_HIP_AUTODETECT "Derive the HIP compiler and ROCm flags from hipcc/hipconfig" ON)

# Sets CMAKE_HIP_COMPILER (cache, unless given), CMAKE_HIP_COMPILER_ROCM_ROOT and CMAKE_HIP_FLAGS
# (normal variable) for distribution ROCm packages; see the comment at the top. Does nothing when
# hipcc is not installed.
macro(_fusekit_find_hip_toolchain)
  set(_hip_hints)
  if(DEFINED ENV{ROCM_PATH})
    list(APPEND _hip_hints "$ENV{ROCM_PATH}/bin")
  endif()
  find_program(FUSEKIT_HIPCC hipcc HINTS ${_hip_hints} PATHS /opt/rocm/bin)
  find_program(FUSEKIT_HIPCONFIG hipconfig HINTS ${_hip_hints} PATHS /opt/rocm/bin)
  mark_as_advanced(FUSEKIT_HIPCC FUSEKIT_HIPCONFIG)

  # 1. The clang that hipcc runs.
  if(FUSEKIT_HIPCC AND NOT DEFINED CMAKE_HIP_COMPILER AND "$ENV{HIPCXX}" STREQUAL "")
    execute_process(COMMAND ${CMAKE_COMMAND} -E env HIPCC_VERBOSE=1 ${FUSEKIT_HIPCC} --version
                    OUTPUT_VARIABLE _hip_out ERROR_QUIET RESULT_VARIABLE _hip_rc)
    set(_hip_clang "")
    if(_hip_rc EQUAL 0 AND _hip_out MATCHES "hipcc-cmd: *\"?([^\" \n]+)")
      set(_hip_clang "${CMAKE_MATCH_1}")
    endif()
    if(NOT _hip_clang MATCHES "clang" OR NOT EXISTS "${_hip_clang}")
      set(_hip_clang "")
      if(FUSEKIT_HIPCONFIG)
        execute_process(COMMAND ${FUSEKIT_HIPCONFIG} --hipclangpath OUTPUT_VARIABLE _hip_dir
                        OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _hip_rc)
        if(_hip_rc EQUAL 0 AND EXISTS "${_hip_dir}/clang++")
          set(_hip_clang "${_hip_dir}/clang++")
        endif()
      endif()
    endif()
    if(_hip_clang)
      set(CMAKE_HIP_COMPILER "${_hip_clang}" CACHE FILEPATH "HIP compiler (the clang hipcc uses)")
    endif()
  endif()

  # 2-4: ROCm root, device libraries, HIP version.
  set(_hip_root "")
  if(DEFINED ENV{ROCM_PATH})
    set(_hip_root "$ENV{ROCM_PATH}")
  elseif(FUSEKIT_HIPCONFIG)
    execute_process(COMMAND ${FUSEKIT_HIPCONFIG} --rocmpath OUTPUT_VARIABLE _hip_root
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(_hip_root)
    get_filename_component(_hip_root "${_hip_root}" ABSOLUTE)  # no trailing slash
  endif()
  if(_hip_root AND IS_DIRECTORY "${_hip_root}" AND NOT IS_DIRECTORY "${_hip_root}/amdgcn/bitcode")
    set(_hip_flags "--rocm-path=${_hip_root}")
    set(_hip_bitcode "")
    if(CMAKE_LIBRARY_ARCHITECTURE
       AND EXISTS "${_hip_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode/ockl.bc")
      set(_hip_bitcode "${_hip_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode")
    else()
      file(GLOB _hip_ockl "${_hip_root}/lib/*/amdgcn/bitcode/ockl.bc")
      if(_hip_ockl)
        list(GET _hip_ockl 0 _hip_ockl)
        get_filename_component(_hip_bitcode "${_hip_ockl}" DIRECTORY)
      endif()
    endif()
    if(_hip_bitcode)
      string(APPEND _hip_flags " --hip-device-lib-path=${_hip_bitcode}")
    endif()
    if(FUSEKIT_HIPCONFIG AND NOT EXISTS "${_hip_root}/bin/.hipVersion")
      execute_process(COMMAND ${FUSEKIT_HIPCONFIG} --version OUTPUT_VARIABLE _hip_version
                      OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(_hip_version MATCHES "^([0-9]+\\.[0-9]+\\.[0-9]+)")
        string(APPEND _hip_flags " --hip-version=${CMAKE_MATCH_1}")
      endif()
    endif()
    set(CMAKE_HIP_FLAGS "${_hip_flags} ${CMAKE_HIP_FLAGS}")
    message(STATUS "fusekit: HIP flags for this ROCm layout: ${_hip_flags}")

    # CMake 3.25 looks for hip-lang only in <root>/lib/cmake; forward it from the multiarch dir.
    set(_hip_lang "${_hip_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang")
    if(NOT DEFINED CMAKE_HIP_COMPILER_ROCM_ROOT AND CMAKE_LIBRARY_ARCHITECTURE
       AND NOT EXISTS "${_hip_root}/lib/cmake/hip-lang/hip-lang-config.cmake"
       AND EXISTS "${_hip_lang}/hip-lang-config.cmake")
      # hip-lang's own dependencies are multiarch packages too, and CMake's test projects enable
      # only HIP, where CMAKE_LIBRARY_ARCHITECTURE is not known yet: name their directories.
      set(_hip_shim "${CMAKE_BINARY_DIR}/fusekit-rocm-root")
      set(_hip_text "# Generated by cmake/FusekitGpu.cmake: forwards to the multiarch hip-lang.\n")
      foreach(_hip_dep amd_comgr AMDDeviceLibs)
        foreach(_hip_dir "${_hip_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/${_hip_dep}"
                         "${_hip_root}/lib/cmake/${_hip_dep}")
          if(IS_DIRECTORY "${_hip_dir}")
            string(APPEND _hip_text
                   "if(NOT ${_hip_dep}_DIR)\n  set(${_hip_dep}_DIR \"${_hip_dir}\")\nendif()\n")
            break()
          endif()
        endforeach()
      endforeach()
      string(APPEND _hip_text "include(\"${_hip_lang}/hip-lang-config.cmake\")\n")
      # The package adds <prefix>/include = /usr/include as a -isystem directory, which breaks
      # libstdc++'s #include_next <math.h> in CMake's compiler checks (they run before the
      # implicit directories are known and filtered). /usr/include is searched anyway: drop it.
      if(_hip_root STREQUAL "/usr")
        string(APPEND _hip_text [=[
foreach(_fusekit_t hip-lang::device hip-lang::amdhip64)
  foreach(_fusekit_p INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(_fusekit_v ${_fusekit_t} ${_fusekit_p})
    if(_fusekit_v)
      # Twice: adjacent entries share a separator.
      string(REGEX REPLACE "(^|;|:)/usr/include(;|>|$)" "\\1\\2" _fusekit_v "${_fusekit_v}")
      string(REGEX REPLACE "(^|;|:)/usr/include(;|>|$)" "\\1\\2" _fusekit_v "${_fusekit_v}")
      set_target_properties(${_fusekit_t} PROPERTIES ${_fusekit_p} "${_fusekit_v}")
    endif()
  endforeach()
endforeach()
]=])
      endif()
      file(WRITE "${_hip_shim}/lib/cmake/hip-lang/hip-lang-config.cmake" "${_hip_text}")
      set(CMAKE_HIP_COMPILER_ROCM_ROOT "${_hip_shim}")
    endif()
  endif()
endmacro()

set(_requested "${FUSEKIT_GPU}")
string(TOUPPER "${_requested}" _requested)
set(FUSEKIT_GPU_BACKEND NONE)
if(_requested STREQUAL "AUTO")
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(FUSEKIT_GPU_BACKEND CUDA)
  else()
    if(FUSEKIT_HIP_AUTODETECT)
      _fusekit_find_hip_toolchain()
    endif()
    check_language(HIP)
    if(CMAKE_HIP_COMPILER)
      set(FUSEKIT_GPU_BACKEND HIP)
    endif()
  endif()
elseif(_requested STREQUAL "CUDA" OR _requested STREQUAL "HIP" OR _requested STREQUAL "OFF")
  if(NOT _requested STREQUAL "OFF")
    set(FUSEKIT_GPU_BACKEND ${_requested})
  endif()
else()
  message(FATAL_ERROR "FUSEKIT_GPU must be AUTO, CUDA, HIP or OFF, not '${FUSEKIT_GPU}'")
endif()

if(FUSEKIT_GPU_BACKEND STREQUAL "CUDA")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
elseif(FUSEKIT_GPU_BACKEND STREQUAL "HIP")
  set(_fusekit_default_hip_archs OFF)
  if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
    set(CMAKE_HIP_ARCHITECTURES gfx90a gfx940 gfx1030)
    set(_fusekit_default_hip_archs ON)
  endif()
  if(FUSEKIT_HIP_AUTODETECT AND NOT _requested STREQUAL "AUTO")
    _fusekit_find_hip_toolchain()
  endif()
  enable_language(HIP)
  # MI300X / MI300A (gfx942) load no gfx940 code: by default, their code too where the compiler
  # knows the target (ROCm 5.7 and later; Debian's ROCm 5.2 does not).
  if(_fusekit_default_hip_archs)
    set(_probe "${CMAKE_CURRENT_BINARY_DIR}/fusekit_gfx942_probe.hip")
    # The target alone is asked about: no HIP headers or device libraries (-nogpuinc -nogpulib).
    file(WRITE "${_probe}" "__attribute__((global)) void fusekit_probe() {}\n")
    execute_process(
      COMMAND "${CMAKE_HIP_COMPILER}" -x hip --offload-arch=gfx942 --offload-device-only
              -nogpuinc -nogpulib -c "${_probe}" -o "${_probe}.o"
      RESULT_VARIABLE _gfx942_rc OUTPUT_QUIET ERROR_QUIET)
    if(_gfx942_rc EQUAL 0)
      list(APPEND CMAKE_HIP_ARCHITECTURES gfx942)
    endif()
    message(STATUS "fusekit HIP architectures: ${CMAKE_HIP_ARCHITECTURES}")
  endif()
  set(CMAKE_HIP_STANDARD 17)
  set(CMAKE_HIP_STANDARD_REQUIRED ON)
  find_package(hip REQUIRED)
endif()
message(STATUS "fusekit GPU backend: ${FUSEKIT_GPU_BACKEND}")
# Recorded in the cache so that scripts (.ci/run) can read what was built.
set(FUSEKIT_GPU_BACKEND_BUILT "${FUSEKIT_GPU_BACKEND}" CACHE INTERNAL "GPU backend of this build")

# Marks `sources` of `target` as GPU code and links the runtime.
function(fusekit_configure_gpu_target target sources)
  if(FUSEKIT_GPU_BACKEND STREQUAL "CUDA")
    target_link_libraries(${target} PUBLIC CUDA::cudart)
    if(FUSEKIT_RESOURCE_USAGE)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
    endif()
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
    if(FUSEKIT_CUDA_COMPILE_CHECK)
      # cicc at -O0: its front end still instantiates and lowers every kernel to PTX, which is
      # what a compile check needs; its optimizer is about half of a norm unit's compile time
      # (norm_layer.cu as PTX: 289 s, 144 s at -O0).
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xcicc=-O0>)
      target_compile_definitions(${target} PRIVATE FUSEKIT_CUDA_COMPILE_CHECK=1)
    endif()
  elseif(FUSEKIT_GPU_BACKEND STREQUAL "HIP")
    set_source_files_properties(${sources} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE HIP)
    target_link_libraries(${target} PUBLIC hip::host)
    if(FUSEKIT_RESOURCE_USAGE)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:HIP>:-Rpass-analysis=kernel-resource-usage>)
    endif()
  endif()
endfunction()
