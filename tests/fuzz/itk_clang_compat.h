// Debian's ITK 5.2 ships an itk_compiler_detection.h generated for GCC only ("Unsupported
// compiler" under clang). tests/fuzz/run.sh force-includes this file (-include in
// CMAKE_CXX_FLAGS) in every C++ translation unit of build-fuzz: clang is presented as GCC 12 while ITK's header is
// read once, then restored; its include guard keeps later includes from re-reading it.
// Clang implements every C++11/14 feature that header asks about.
// Only translation units that see ITK's include folders read it (CMake's compiler checks do not).
#if __has_include(<itk_compiler_detection.h>)
#pragma push_macro("__clang__")
#pragma push_macro("__GNUC__")
#pragma push_macro("__GNUC_MINOR__")
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wbuiltin-macro-redefined"
#undef __clang__
#undef __GNUC__
#undef __GNUC_MINOR__
#define __GNUC__ 12
#define __GNUC_MINOR__ 2
#include <itk_compiler_detection.h>
#pragma clang diagnostic pop
#pragma pop_macro("__GNUC_MINOR__")
#pragma pop_macro("__GNUC__")
#pragma pop_macro("__clang__")
#endif
