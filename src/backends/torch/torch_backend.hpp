// The PyTorch backend on libtorch's C++ API (ATen, eager): one CPU device, "torch:0", whose
// sessions run carb's IR layer by layer as torchvision's ResNet modules do in eval and inference
// mode, on the same seeded parameters as carb's own engines. Built, where CARB_WITH_TORCH, as a
// module (libcarb_torch.so) that registry.cpp opens only when a torch device is asked for.
#pragma once

#include <cstddef>

#include "carb/backend.hpp"

/// The module's entry point: a new libtorch backend (threads: at::set_num_threads with OpenMP's
/// count, OMP_NUM_THREADS as for the CPU engine), or null with the reason in `why` (at most
/// `why_size` bytes, NUL-terminated). The caller owns the backend.
extern "C" carb::Backend* carb_torch_make_backend(char* why, std::size_t why_size);

/// Its name, for dlsym.
inline constexpr const char* kTorchEntryPoint = "carb_torch_make_backend";
