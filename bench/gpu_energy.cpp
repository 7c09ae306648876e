// GPU energy counter for the benches (bench_util.h gpu_energy_joules): NVML's total-energy counter,
// with libnvidia-ml opened at run time (dlopen), so the tool builds and runs where it is missing
// (the build machine has no driver).
#include <dlfcn.h>

#include <cuda_runtime_api.h>

#include "bench/bench_util.h"

namespace moekit::bench {
namespace {

using NvmlDevice = void*;
using InitFn = int (*)();
using HandleByBusFn = int (*)(const char*, NvmlDevice*);
using EnergyFn = int (*)(NvmlDevice, unsigned long long*);

struct Nvml {
  HandleByBusFn handle_by_bus = nullptr;
  EnergyFn energy = nullptr;
  bool ok = false;

  static Nvml& get() {
    static Nvml n;
    return n;
  }

 private:
  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
    handle_by_bus = reinterpret_cast<HandleByBusFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    energy = reinterpret_cast<EnergyFn>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    ok = init && handle_by_bus && energy && init() == 0;  // NVML_SUCCESS
  }
};

}  // namespace

double gpu_energy_joules(int device) {
  Nvml& nvml = Nvml::get();
  if (!nvml.ok) return -1.0;
  char bus[64] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) return -1.0;
  NvmlDevice handle = nullptr;
  unsigned long long mj = 0;
  if (nvml.handle_by_bus(bus, &handle) != 0 || nvml.energy(handle, &mj) != 0) return -1.0;
  return double(mj) * 1e-3;
}

}  // namespace moekit::bench
