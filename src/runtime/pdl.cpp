#include "runtime/pdl.h"

namespace moekit::detail {
namespace {
thread_local bool g_pdl = false;
}  // namespace

bool pdl_active() { return g_pdl; }

PdlScope::PdlScope(bool on) : prev_(g_pdl) { g_pdl = on; }
PdlScope::~PdlScope() { g_pdl = prev_; }

}  // namespace moekit::detail
