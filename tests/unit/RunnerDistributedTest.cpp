// The runner's side of data parallelism (docs/distributed.md), without GPUs: each rank's data
// shard (rank r's batch k and the other ranks' batch k together are exactly the batch k a single
// process with the global batch reads), rank detection from the launchers' environments, the
// shared-file rendezvous of the NCCL id (delivery, stale files, timeout), and the message when the
// MPI library for the MPI broadcast of the id is missing.
#include "runtime/runner/BatchLoader.h"
#include "runtime/runner/Distributed.h"
#include "runtime/runner/MpiBootstrap.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <utime.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace hgp {
namespace {

/// Sample i has every pixel equal to i and label i % 10.
class CountingDataset final : public Dataset {
public:
  explicit CountingDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  const Shape& sampleShape() const override { return shape_; }
  Status get(int64_t i, int64_t, float* image, int64_t* label) const override {
    for (int k = 0; k < 4; ++k) image[k] = float(i);
    *label = i % 10;
    return Status::ok();
  }
  std::string describe() const override { return "counting"; }

private:
  int64_t n_;
  Shape shape_{1, 2, 2};
};

TEST(RunnerDistributed, RankShardsTogetherAreTheGlobalBatch) {
  CountingDataset data(103);
  const int64_t b = 5;
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    BatchLoader single(data, b * ranks, /*shuffle=*/true, 42, /*dropLast=*/true);
    std::vector<std::unique_ptr<BatchLoader>> shards;
    for (int r = 0; r < ranks; ++r)
      shards.push_back(std::make_unique<BatchLoader>(data, b, true, 42, true, 0, 0, r, ranks));
    EXPECT_EQ(single.batchesPerEpoch(), 103 / (b * ranks));
    std::vector<int64_t> seen;
    // Two epochs: the order changes with the epoch, the same way everywhere.
    for (int64_t step = 0; step < 2 * single.batchesPerEpoch(); ++step) {
      auto whole = single.next();
      for (int r = 0; r < ranks; ++r) {
        EXPECT_EQ(shards[size_t(r)]->batchesPerEpoch(), single.batchesPerEpoch());
        auto part = shards[size_t(r)]->next();
        EXPECT_EQ(part->epoch, whole->epoch);
        EXPECT_EQ(part->index, whole->index);
        for (int64_t i = 0; i < b; ++i) {
          EXPECT_EQ(part->labels[size_t(i)], whole->labels[size_t(r * b + i)]);
          EXPECT_EQ(part->images[size_t(4 * i)], whole->images[size_t(4 * (r * b + i))]);
          if (step < single.batchesPerEpoch()) seen.push_back(int64_t(part->images[size_t(4 * i)]));
        }
        shards[size_t(r)]->recycle(std::move(part));
      }
      single.recycle(std::move(whole));
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end())
        << "shards overlap within an epoch";
  }
}

struct ScopedEnv {
  std::vector<std::string> names;
  void set(const std::string& n, const std::string& v) {
    setenv(n.c_str(), v.c_str(), 1);
    names.push_back(n);
  }
  ~ScopedEnv() {
    for (const auto& n : names) unsetenv(n.c_str());
  }
};

TEST(RunnerDistributed, PerProcessOutputsGetAFileForEachRank) {
  RankEnv one, two;
  two.ranks = 2;
  two.rank = 1;
  EXPECT_EQ(perRankPath("out/trace.json", one), "out/trace.json");
  EXPECT_EQ(perRankPath("out/trace.json", two), "out/trace.rank1.json");
  EXPECT_EQ(perRankPath("records", two), "records.rank1");
  EXPECT_EQ(perRankPath("", two), "");
}

TEST(RunnerDistributed, DetectsTheLauncher) {
  {
    auto e = detectRankEnv("");
    ASSERT_TRUE(e.hasValue());
    EXPECT_EQ(e->ranks, 1);
    EXPECT_EQ(e->launcher, "none");
  }
  {
    ScopedEnv env;
    env.set("OMPI_COMM_WORLD_RANK", "3");
    env.set("OMPI_COMM_WORLD_SIZE", "4");
    env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    env.set("PMIX_NAMESPACE", "job.7");
    // Without --rendezvous the id goes over MPI.
    auto mpi = detectRankEnv("");
    ASSERT_TRUE(mpi.hasValue()) << mpi.status().toString();
    EXPECT_TRUE(mpi->idOverMpi);
    EXPECT_EQ(mpi->rendezvous, "");
    auto e = detectRankEnv("/tmp/shared");
    ASSERT_TRUE(e.hasValue()) << e.status().toString();
    EXPECT_FALSE(e->idOverMpi);
    EXPECT_EQ(e->launcher, "openmpi");
    EXPECT_EQ(e->rank, 3);
    EXPECT_EQ(e->ranks, 4);
    EXPECT_EQ(e->localRank, 1);
    EXPECT_EQ(e->jobKey, "job.7");
  }
  {
    ScopedEnv env;
    env.set("PMI_RANK", "1");
    env.set("PMI_SIZE", "2");
    auto e = detectRankEnv("");
    ASSERT_TRUE(e.hasValue()) << e.status().toString();
    EXPECT_EQ(e->launcher, "pmi");
    EXPECT_TRUE(e->idOverMpi);
  }
  {
    // The --gpus launcher always passes a directory; without one it is a usage error.
    ScopedEnv env;
    env.set("HGPC_RANK", "1");
    env.set("HGPC_RANKS", "2");
    env.set("HGPC_LOCAL_RANK", "1");
    auto missing = detectRankEnv("");
    ASSERT_FALSE(missing.hasValue());
    EXPECT_EQ(missing.status().code(), ErrorCode::Usage);
    EXPECT_NE(missing.status().message().find("--rendezvous"), std::string::npos);
  }
  {
    ScopedEnv env;
    env.set("HGPC_RANK", "2");
    env.set("HGPC_RANKS", "2");
    env.set("HGPC_LOCAL_RANK", "2");
    env.set("HGPC_RENDEZVOUS", "/tmp/x");
    EXPECT_FALSE(detectRankEnv("").hasValue()) << "rank 2 of 2 is out of range";
  }
}

TEST(RunnerDistributed, RendezvousFileCarriesTheIdAndIgnoresStaleOnes) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("hgpc-rdv-test-" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(dir);
  RankEnv r0, r1;
  r0.ranks = r1.ranks = 2;
  r1.rank = 1;
  r0.rendezvous = r1.rendezvous = dir;
  std::string id(128, '\0');
  for (size_t i = 0; i < id.size(); ++i) id[i] = char(i * 7);
  // A file left by an earlier launch is ignored: rank 1 times out with a clear error.
  std::filesystem::create_directories(dir);
  std::string path = dir + "/hgpc-nccl-id";
  std::ofstream(path) << "stale";
  struct utimbuf old {
    time(nullptr) - 3600, time(nullptr) - 3600
  };
  ASSERT_EQ(utime(path.c_str(), &old), 0);
  std::string got;
  Status st = shareThroughFile(r1, got, 0.2);
  EXPECT_EQ(st.code(), ErrorCode::PeerFailed);
  EXPECT_NE(st.message().find("rank 0"), std::string::npos) << st.message();
  // Rank 0 publishes; rank 1 reads the same bytes; rank 0 removes the file after the join.
  std::string mine = id;
  ASSERT_TRUE(shareThroughFile(r0, mine, 1).isOk());
  ASSERT_TRUE(shareThroughFile(r1, got, 1).isOk());
  EXPECT_EQ(got, id);
  removeRendezvousFile(r0);
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

TEST(RunnerDistributed, MissingMpiLibraryIsAUsageErrorThatNamesTheWayOut) {
  // The real broadcast runs under mpirun in tests/mpi/MpiBootstrapTest.cpp (CTest mpi_bootstrap).
  ScopedEnv env;
  env.set("HGPC_MPI_LIBRARY", "/nonexistent/libmpi.so.40");
  auto mpi = MpiBootstrap::start("openmpi", 1, 2);
  ASSERT_FALSE(mpi.hasValue());
  EXPECT_EQ(mpi.status().code(), ErrorCode::Usage);
  const std::string m = mpi.status().message();
  EXPECT_NE(m.find("/nonexistent/libmpi.so.40"), std::string::npos) << m;
  EXPECT_NE(m.find("pass --rendezvous DIR"), std::string::npos) << m;
  EXPECT_NE(m.find("install the MPI"), std::string::npos) << m;
}

} // namespace
} // namespace hgp
