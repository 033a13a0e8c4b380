#include "runtime/cuda/Nccl.h"

#include "runtime/cuda/CudaCheck.h"

#include "runtime/support/DynamicLibrary.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

namespace hgp::cuda {

namespace {

std::optional<DynamicLibrary> gNccl;
std::once_flag gOnce;
Status gStatus;

void* resolveNccl(const char* name) {
  void* f = gNccl ? gNccl->symbol(name) : nullptr;
  if (!f) {
    std::fprintf(stderr,
                 "error: %s is missing from the loaded NCCL (%s); hgpc needs NCCL 2.13 or "
                 "later\n",
                 name, gNccl ? DynamicLibrary::lastError().c_str() : "libnccl.so.2 is not loaded");
    std::abort();
  }
  return f;
}

} // namespace

Status loadNccl() {
  std::call_once(gOnce, [] {
    std::vector<DynamicLibrary::Failure> failed;
    gNccl = DynamicLibrary::openFirst({"libnccl.so.2"}, DynamicLibrary::Scope::Global, &failed);
    if (!gNccl) {
      gStatus = Status(ErrorCode::Device, std::string("data-parallel training needs NCCL, and "
                                                      "libnccl.so.2 was not found on the library "
                                                      "path: ") +
                                              DynamicLibrary::reasonsOf(failed));
      return;
    }
    int version = 0;
    ncclResult_t r = ncclGetVersion(&version);
    // Codes are MAJOR*10000 + MINOR*100 + PATCH since 2.9.
    if (r != ncclSuccess || version < 21300)
      gStatus = Status(ErrorCode::Device,
                       "NCCL " + std::to_string(version) + " is too old; hgpc needs 2.13 or later");
  });
  return gStatus;
}

Status ncclError(ncclResult_t e, const char* call, const char* file, int line) {
  // A remote error means another rank failed or went away.
  ErrorCode code = e == ncclRemoteError ? ErrorCode::PeerFailed : ErrorCode::Device;
  return Status(code, failedCall(call, file, line) + ": " + ncclGetErrorString(e));
}

Expected<std::unique_ptr<Communicator>>
Communicator::create(int rank, int ranks, const std::function<Status(std::string& id)>& share) {
  HGP_TRY(loadNccl());
  ncclUniqueId id{};
  std::string bytes;
  if (rank == 0) {
    HGP_NCCL_TRY(ncclGetUniqueId(&id));
    bytes.assign(id.internal, sizeof id.internal);
  }
  HGP_TRY_CTX(share(bytes), "sharing the NCCL id between ranks");
  if (bytes.size() != sizeof id.internal)
    return Status(ErrorCode::PeerFailed, "the NCCL id received from rank 0 has " +
                                             std::to_string(bytes.size()) + " bytes, not " +
                                             std::to_string(sizeof id.internal));
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  std::unique_ptr<Communicator> c(new Communicator());
  c->rank_ = rank;
  c->ranks_ = ranks;
  HGP_NCCL_TRY(ncclCommInitRank(&c->comm_, ranks, id, rank));
  return c;
}

Communicator::~Communicator() {
  if (!comm_) return;
  if (aborted_) return;
  // A communicator with an error cannot be destroyed cleanly; abort it instead.
  ncclResult_t err = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &err) != ncclSuccess || err != ncclSuccess)
    ncclCommAbort(comm_);
  else
    ncclCommDestroy(comm_);
}

Status Communicator::asyncError() {
  if (aborted_) return Status(ErrorCode::PeerFailed, "the communicator was aborted");
  ncclResult_t err = ncclSuccess;
  HGP_NCCL_TRY(ncclCommGetAsyncError(comm_, &err));
  if (err == ncclSuccess || err == ncclInProgress) return Status::ok();
  const char* last = ncclGetLastError(comm_);
  return Status(ErrorCode::PeerFailed, std::string("NCCL reported ") + ncclGetErrorString(err) +
                                           (last && *last ? std::string(": ") + last : ""));
}

void Communicator::abort() {
  if (aborted_ || !comm_) return;
  aborted_ = true;
  ncclCommAbort(comm_);
}

} // namespace hgp::cuda

extern "C" {
#define HGP_NCCL_FN(Ret, Name, Params, Args)                                                       \
  Ret Name Params {                                                                                \
    using Fn = Ret(*) Params;                                                                      \
    static Fn fn = reinterpret_cast<Fn>(hgp::cuda::resolveNccl(#Name));                            \
    return fn Args;                                                                                \
  }
#include "runtime/cuda/Nccl.def"
}
