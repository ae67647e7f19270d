// The CPU backend on oneDNN: one device (every core of the machine) and its sessions.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <string>

#include "carb/backend.hpp"
#include "pages.hpp"

namespace carb::cpu {

/// The oneDNN CPU backend. Threads: oneDNN's OpenMP runtime uses OMP_NUM_THREADS (default: every
/// core the process may run on); DNNL_MAX_CPU_ISA caps the instruction set it dispatches to.
std::unique_ptr<Backend> make_cpu_backend();

/// The processor's model name (/proc/cpuinfo), "unknown CPU" where it cannot be read.
std::string cpu_model_name();
/// The instruction set oneDNN dispatches to on this processor, e.g. "avx512_core_bf16".
std::string effective_isa_name();

/// Why the CPU engine cannot run `network` as PyTorch would, empty when it can.
std::string unsupported_reason(const Network& network);

/// What preparing `network` on `engine` would take (MemoryUsage as the session reports it),
/// from oneDNN's primitive descriptions and the arena plan alone: nothing allocated or generated.
MemoryUsage plan_cpu_memory(const Network& network, const dnnl::engine& engine);

/// Prepares `network` on `engine` (a CPU engine) in fp32 or bf16 activations and weights, its
/// weights in memory taken from `weight_memory` and given back to it when the session ends.
std::unique_ptr<Session> make_cpu_session(const Network& network, std::uint64_t seed,
                                          const dnnl::engine& engine,
                                          std::shared_ptr<WeightMemory> weight_memory);

}  // namespace carb::cpu
