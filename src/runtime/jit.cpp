#include "runtime/jit.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <nvrtc.h>
#include <unistd.h>

#include "common/check.h"
#include "runtime/device.h"
#include "runtime/driver.h"
#include "runtime/embedded.h"
#include "runtime/knobs.h"

namespace moekit::jit {
namespace fs = std::filesystem;
namespace {

struct Hasher {
  uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
  void add(const std::string& s) {
    for (unsigned char c : s) {
      h1 = (h1 ^ c) * 0x100000001b3ull;
      h2 = (h2 ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
    h1 = (h1 ^ 0xff) * 0x100000001b3ull;  // separator
  }
  std::string hex() const {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)h1, (unsigned long long)h2);
    return buf;
  }
};

void check_nvrtc(nvrtcResult r, const char* what) {
  MOEKIT_REQUIRE(r == NVRTC_SUCCESS, ErrorCode::kCompileError, "moekit: NVRTC ", what, " failed: ",
                 nvrtcGetErrorString(r));
}

std::vector<std::string> nvrtc_options() {
  return {"--gpu-architecture=sm_90a", "-std=c++17", "-DNDEBUG", "--device-as-default-execution-space"};
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<char> nvrtc_compile(const std::string& source, const std::string& name_hint, std::string& log) {
  const auto& files = embedded_sources();
  std::vector<const char*> headers, names;
  for (const auto& f : files) {
    headers.push_back(f.text);
    names.push_back(f.path);
  }
  nvrtcProgram prog = nullptr;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), (name_hint + ".cu").c_str(), int(headers.size()),
                                 headers.data(), names.data()),
              "nvrtcCreateProgram");
  auto opts = nvrtc_options();
  std::vector<const char*> copts;
  for (auto& o : opts) copts.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog, int(copts.size()), copts.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  log.assign(log_size, '\0');
  if (log_size > 1) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    detail::throw_error(ErrorCode::kCompileError,
                        detail::concat("moekit: NVRTC failed to compile ", name_hint, ":\n", log));
  }
  if (detail::knobs().jit_verbose && log_size > 1) std::fprintf(stderr, "[moekit jit] %s:\n%s\n", name_hint.c_str(), log.c_str());
  size_t size = 0;
  check_nvrtc(nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize");
  std::vector<char> cubin(size);
  check_nvrtc(nvrtcGetCUBIN(prog, cubin.data()), "nvrtcGetCUBIN");
  nvrtcDestroyProgram(&prog);
  return cubin;
}

std::string cache_key(const std::string& source) {
  Hasher h;
  h.add(source);
  for (const auto& f : embedded_sources()) {
    h.add(f.path);
    h.add(f.text);
  }
  for (const auto& o : nvrtc_options()) h.add(o);
  h.add(nvrtc_version());
  return h.hex();
}

// The disk cache's files of a translation unit: the cubin, and the compiler's log next to it.
fs::path cubin_path(const std::string& source, const std::string& name_hint) {
  return fs::path(cache_dir()) / (name_hint + "-" + cache_key(source) + ".cubin");
}
fs::path log_path(const fs::path& cubin) { return fs::path(cubin.string() + ".log"); }

// Write-then-rename: readers never see a partial file, concurrent writers are harmless; an
// unwritable cache only costs recompilation.
void write_cache_file(const fs::path& path, const char* data, size_t size) {
  std::ostringstream tmp_name;
  tmp_name << path.string() << ".tmp" << ::getpid();
  {
    std::ofstream out(tmp_name.str(), std::ios::binary);
    if (out) out.write(data, std::streamsize(size));
  }
  std::error_code ec;
  fs::rename(tmp_name.str(), path, ec);
  if (ec) fs::remove(tmp_name.str(), ec);
}

}  // namespace

std::string cache_dir() {
  static std::once_flag once;
  static std::string dir;
  std::call_once(once, [] {
    const fs::path p = detail::knobs().cache_dir;
    std::error_code ec;
    fs::create_directories(p, ec);
    dir = p.string();
  });
  return dir;
}

std::vector<char> compile_cubin(const std::string& source, const std::string& name_hint) {
  const fs::path file = cubin_path(source, name_hint);
  {
    std::ifstream in(file, std::ios::binary);
    if (in) {
      std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!data.empty()) return data;
    }
  }
  std::string log;
  std::vector<char> cubin = nvrtc_compile(source, name_hint, log);
  // The compiler's messages (e.g. ptxas performance advisories) are kept next to the cubin.
  if (!log.empty()) write_cache_file(log_path(file), log.data(), log.size());
  write_cache_file(file, cubin.data(), cubin.size());
  return cubin;
}

std::string compile_log(const std::string& source, const std::string& name_hint) {
  compile_cubin(source, name_hint);
  std::ifstream in(log_path(cubin_path(source, name_hint)), std::ios::binary);
  return in ? std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()) : std::string();
}

Kernel get_kernel(const std::string& source, const std::string& entry) {
  static std::mutex mu;
  static std::map<std::string, Kernel> loaded;
  // The entry name encodes the whole configuration (callers guarantee one source per entry), so
  // the hot path is one map lookup; the source is hashed only on a miss.
  const int device = detail::current_device().device;
  const std::string key = std::to_string(device) + ":" + entry;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(key);
  if (it != loaded.end()) return it->second;

  std::vector<char> cubin = compile_cubin(source, entry);
  const auto& drv = detail::driver();
  MOEKIT_CUDA_CHECK(cudaFree(nullptr));  // make the runtime's primary context current
  CUmodule module = nullptr;
  detail::check_cu(drv.moduleLoadData(&module, cubin.data()), "cuModuleLoadData");
  Kernel k;
  detail::check_cu(drv.moduleGetFunction(&k.fn, module, entry.c_str()), "cuModuleGetFunction");
  detail::check_cu(drv.funcSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(detail::current_device().smem_optin)),
                   "cuFuncSetAttribute(max dynamic shared memory)");
  loaded.emplace(key, k);
  return k;
}

}  // namespace moekit::jit
