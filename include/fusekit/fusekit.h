// The whole public C++ API of fusekit. Includes no CUDA, HIP or PyTorch header.
#pragma once

#include "fusekit/activation.h"
#include "fusekit/fp8.h"
#include "fusekit/norm.h"
#include "fusekit/norm_backward.h"
#include "fusekit/runtime.h"
#include "fusekit/status.h"
#include "fusekit/tensor.h"
#include "fusekit/version.h"
