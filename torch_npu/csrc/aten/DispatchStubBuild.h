// Include before any ATen/native header that declares DispatchStubs.
//
// libtorch_cpu (x86-64) is built with AVX2 and AVX512 kernels; DispatchStub's declarations must match
// that build or its inline members reference functions libtorch does not export.
#pragma once

#if defined(__x86_64__) && !defined(HAVE_AVX2_CPU_DEFINITION)
#define HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
