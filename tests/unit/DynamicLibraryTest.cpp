// DynamicLibraryTest.cpp - the one run-time library loader (runtime/support/DynamicLibrary.h):
// the first name that loads wins, every name that does not is reported with the loader's reason,
// and a function found in the library computes what the linked one does.
#include "runtime/support/DynamicLibrary.h"

#include <gtest/gtest.h>

#include <cmath>

namespace hgp {
namespace {

TEST(DynamicLibrary, OpensTheFirstNameThatLoadsAndReportsTheOthers) {
  std::vector<DynamicLibrary::Failure> failed;
  auto lib = DynamicLibrary::openFirst({"libhgp-no-such-library.so.1", "libm.so.6", "libc.so.6"},
                                       DynamicLibrary::Scope::Local, &failed);
  ASSERT_TRUE(lib.has_value());
  EXPECT_EQ(lib->name(), "libm.so.6");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].name, "libhgp-no-such-library.so.1");
  EXPECT_NE(failed[0].reason.find("libhgp-no-such-library.so.1"), std::string::npos)
      << failed[0].reason;
  EXPECT_EQ(DynamicLibrary::namesOf(failed), "libhgp-no-such-library.so.1");
  using CosFn = double (*)(double);
  CosFn cosine = lib->function<CosFn>("cos");
  ASSERT_NE(cosine, nullptr);
  EXPECT_EQ(cosine(0.5), std::cos(0.5));
  EXPECT_EQ(lib->symbol("hgp_no_such_symbol"), nullptr);
}

TEST(DynamicLibrary, NoneLoads) {
  std::vector<DynamicLibrary::Failure> failed;
  auto lib = DynamicLibrary::openFirst({"libhgp-missing-a.so", "libhgp-missing-b.so"},
                                       DynamicLibrary::Scope::Global, &failed);
  EXPECT_FALSE(lib.has_value());
  EXPECT_EQ(DynamicLibrary::namesOf(failed), "libhgp-missing-a.so, libhgp-missing-b.so");
  EXPECT_EQ(failed.size(), 2u);
}

} // namespace
} // namespace hgp
