// moekit's Python extensions (moekit._C, moekit._ep): moekit::Error → the Python exception its
// code stands for, with moekit's message. Bad arguments (kInvalidArgument, kMisaligned) are the
// caller's ValueError; everything else is a RuntimeError. Registered translators run before
// nanobind's default std::exception mapping.
#pragma once
#include <nanobind/nanobind.h>

#include <exception>

#include "moekit/error.h"

namespace moekit::py {

inline void register_error_translator() {
  nanobind::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const moekit::Error& e) {
      switch (e.code()) {
        case moekit::ErrorCode::kInvalidArgument:
        case moekit::ErrorCode::kMisaligned:
          PyErr_SetString(PyExc_ValueError, e.what());
          break;
        default:
          PyErr_SetString(PyExc_RuntimeError, e.what());
          break;
      }
    }
  });
}

}  // namespace moekit::py
