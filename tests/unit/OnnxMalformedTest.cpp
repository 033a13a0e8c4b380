// Runs the malformed-model corpus (tests/malformed, written by make_corpus.py): every file must
// be rejected with ErrorCode::InvalidModel and one line containing its expected fragment.
#include "frontends/onnx/OnnxImporter.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

namespace hgp {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(HGP_SOURCE_DIR) / "tests" / "malformed";

std::vector<std::pair<std::string, std::string>> expectations() {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream f(kCorpus / "expected.txt");
  std::string line;
  while (std::getline(f, line)) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

TEST(OnnxMalformedTest, EveryCorpusFileFailsWithItsMessage) {
  auto cases = expectations();
  ASSERT_GE(cases.size(), 40u);
  for (const auto& [file, fragment] : cases) {
    auto r = importOnnxFile((kCorpus / file).string());
    ASSERT_FALSE(r.hasValue()) << file << " imported";
    Status s = r.status();
    EXPECT_EQ(s.code(), ErrorCode::InvalidModel) << file << ": " << s.toString();
    EXPECT_NE(s.message().find(fragment), std::string::npos)
        << file << ": expected '" << fragment << "' in: " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << file << ": not one line";
  }
}

TEST(OnnxMalformedTest, EveryCorpusFileIsListed) {
  std::set<std::string> listed;
  for (const auto& c : expectations()) listed.insert(c.first);
  for (const auto& e : fs::directory_iterator(kCorpus))
    if (e.path().extension() == ".onnx") {
      EXPECT_TRUE(listed.count(e.path().filename().string())) << e.path();
    }
}

TEST(OnnxMalformedTest, BytesWithoutAFolderForbidExternalData) {
  std::ifstream f(kCorpus / "external_out_of_range.onnx", std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto r = importOnnxBytes(bytes, "");
  ASSERT_FALSE(r.hasValue());
  EXPECT_NE(r.status().message().find("external data, which is not allowed here"),
            std::string::npos)
      << r.status().message();
}

TEST(OnnxMalformedTest, MissingFileIsAnIoError) {
  auto r = importOnnxFile((kCorpus / "no-such-model.onnx").string());
  ASSERT_FALSE(r.hasValue());
  EXPECT_EQ(r.status().code(), ErrorCode::Io);
}

} // namespace
} // namespace hgp
