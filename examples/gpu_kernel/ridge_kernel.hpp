// The launch of gpu_kernel.cpp's kernel (ridge_kernel.cu): trains chunk `c` of the
// epoch's order on the weights `w` (device memory) with the chunk's access.
#pragma once

#include "hogwild/device_kernel.hpp"

void launch_ridge(const hogwild::DeviceChunk& c, float* w);
