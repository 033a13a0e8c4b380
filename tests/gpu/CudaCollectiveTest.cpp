// The NCCL path of AllReduce on 2 GPUs (skips with fewer): two CUDA backends in two threads of
// this process join one communicator through an in-memory rendezvous, each writes its own values
// into the bucket's operands, and every result must be the elementwise mean of the two ranks'
// values, computed here on the host, in eager runs and in captured and replayed CUDA graphs.
#include "tests/gpu/GpuTestUtil.h"

#include <cuda_runtime.h>

#include <cmath>
#include <future>
#include <thread>

namespace hgp::gputest {
namespace {

/// The value rank `rank` writes into element i of operand k before run `run`.
float valueOf(int rank, int run, size_t k, int64_t i) {
  return float(rank * 3 + 1) * std::sin(float(i) * 0.37f + float(k)) + float(run) -
         2.5f * float(rank);
}

TEST(CudaCollective, TwoRanksAverageInEagerAndGraphMode) {
  HGP_REQUIRE_CUDA();
  if (cpuStandIn()) GTEST_SKIP() << "needs NCCL";
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) GTEST_SKIP() << "needs 2 GPUs";
  Graph g("collective");
  std::vector<Value*> ps, local;
  for (Shape s : {Shape{3, 5}, Shape{}, Shape{4099}}) {
    ps.push_back(addValue(g, "p" + std::to_string(ps.size()), TensorRole::Param, {DType::F32, s}));
    AttrMap one;
    one.setFloat("alpha", 1.0);
    local.push_back(op1(g, OpKind::Scale, {ps.back()}, one));
  }
  AttrMap a;
  a.setString("reduce", "avg");
  a.setInt("ranks", 2);
  a.setInt("bucket", 0);
  Node* n = addNode(g, OpKind::AllReduce, local, a, int(local.size()));
  ASSERT_NE(n, nullptr);
  auto e = emit(g, bindOutputs(g, n->outputs()));
  ASSERT_TRUE(e.has_value());
  const Plan& plan = e->plan;

  {
    std::promise<std::string> id;
    std::shared_future<std::string> idReady = id.get_future().share();
    constexpr int kRuns = 5; // eager on both slots, then captured graphs and replays
    std::vector<std::vector<std::vector<float>>> results[2]; // [rank][run][operand]
    std::string errors[2];
    auto rank = [&](int r) {
      BackendOptions o;
      o.device = r;
      o.rank = r;
      o.ranks = 2;
      o.shareUniqueId = [&, r](std::string& bytes) {
        if (r == 0)
          id.set_value(bytes);
        else
          bytes = idReady.get();
        return Status::ok();
      };
      auto b = createCudaBackend(o);
      if (!b) {
        errors[r] = b.status().toString();
        if (r == 0) id.set_value("");
        return;
      }
      Status st = (*b)->load(plan, InitData{e->data, {}});
      for (int run = 0; st && run < kRuns; ++run) {
        for (size_t k = 0; st && k < ps.size(); ++k) {
          int t = plan.findTensor(ps[k]->name());
          std::vector<float> v(size_t(plan.tensors[size_t(t)].type.numElements()));
          for (size_t i = 0; i < v.size(); ++i) v[i] = valueOf(r, run, k, int64_t(i));
          st = (*b)->write(t, v.data());
        }
        if (st) st = (*b)->run("step");
        results[r].emplace_back();
        for (size_t k = 0; st && k < ps.size(); ++k) {
          int t = plan.binding("out." + std::to_string(k));
          std::vector<float> v(size_t(plan.tensors[size_t(t)].type.numElements()));
          st = (*b)->read(t, v.data());
          results[r].back().push_back(std::move(v));
        }
      }
      if (!st) errors[r] = st.toString();
    };
    std::thread t0(rank, 0), t1(rank, 1);
    t0.join();
    t1.join();
    ASSERT_EQ(errors[0], "");
    ASSERT_EQ(errors[1], "");
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(results[r].size(), size_t(kRuns));
      for (int run = 0; run < kRuns; ++run)
        for (size_t k = 0; k < ps.size(); ++k) {
          const std::vector<float>& got = results[r][size_t(run)][k];
          for (size_t i = 0; i < got.size(); ++i) {
            float want = 0.5f * (valueOf(0, run, k, int64_t(i)) + valueOf(1, run, k, int64_t(i)));
            ASSERT_NEAR(got[i], want, 1e-6f * (1 + std::fabs(want)))
                << "rank " << r << " run " << run << " operand " << k << " element " << i;
          }
        }
    }
  }
}

} // namespace
} // namespace hgp::gputest
