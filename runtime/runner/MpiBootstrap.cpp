#include "runtime/runner/MpiBootstrap.h"

#include "runtime/support/DynamicLibrary.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

namespace hgp {

namespace {

constexpr int kMpiSuccess = 0;
// The MPICH ABI's predefined handles (MPICH's mpi.h; the same in every libmpi.so.12).
constexpr int kMpichCommWorld = 0x44000000;
constexpr int kMpichByte = 0x4c00010d;
constexpr int kMpichErrorsReturn = 0x54000001;
// The larger of the two libraries' MPI_MAX_ERROR_STRING (MPICH 1024, Open MPI 256) and
// MPI_MAX_LIBRARY_VERSION_STRING (MPICH 8192, Open MPI 256).
constexpr int kMaxErrorString = 1024;
constexpr int kMaxLibraryVersion = 8192;
// An NCCL id is 128 bytes; anything much larger announced by rank 0 is not one.
constexpr uint64_t kMaxBroadcast = 1 << 20;

/// The calls that take handles, for one ABI's handle type: void* (Open MPI) or int (MPICH).
template <typename H> struct HandleCalls {
  int (*commRank)(H, int*) = nullptr;
  int (*commSize)(H, int*) = nullptr;
  int (*bcast)(void*, int, H, int, H) = nullptr;
  int (*abort)(H, int) = nullptr;
  int (*setErrhandler)(H, H) = nullptr;
  H world{}, byte{}, errorsReturn{};
};

template <typename F>
Status resolve(const DynamicLibrary& lib, const std::string& libName, const char* name, F& out) {
  out = lib.function<F>(name);
  if (!out)
    return Status(ErrorCode::Usage,
                  std::string(name) + " is missing from " + libName + "; is it an MPI library?");
  return Status::ok();
}

/// The start of a text an MPI library returned, up to its first NUL, newline or (with
/// `comma`) comma, tabs made spaces: "Open MPI v4.1.4", "MPICH Version: 4.0.2".
std::string firstLine(std::string s, bool comma = false) {
  s.erase(std::find_if(s.begin(), s.end(),
                       [&](char c) { return c == '\0' || c == '\n' || (comma && c == ','); }),
          s.end());
  std::replace(s.begin(), s.end(), '\t', ' ');
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

} // namespace

struct MpiBootstrap::Api {
  bool ompi = false;
  int (*initialized)(int*) = nullptr;
  int (*finalized)(int*) = nullptr;
  int (*init)(int*, char***) = nullptr;
  int (*finalize)() = nullptr;
  int (*errorString)(int, char*, int*) = nullptr;
  HandleCalls<void*> o;
  HandleCalls<int> m;

  template <typename H>
  Status resolveHandleCalls(const DynamicLibrary& lib, const std::string& name,
                            HandleCalls<H>& c) {
    HGP_TRY(resolve(lib, name, "MPI_Comm_rank", c.commRank));
    HGP_TRY(resolve(lib, name, "MPI_Comm_size", c.commSize));
    HGP_TRY(resolve(lib, name, "MPI_Bcast", c.bcast));
    HGP_TRY(resolve(lib, name, "MPI_Abort", c.abort));
    HGP_TRY(resolve(lib, name, "MPI_Comm_set_errhandler", c.setErrhandler));
    return Status::ok();
  }

  int commRank(int* r) { return ompi ? o.commRank(o.world, r) : m.commRank(m.world, r); }
  int commSize(int* n) { return ompi ? o.commSize(o.world, n) : m.commSize(m.world, n); }
  int bcastFromRoot(void* buf, int n) {
    return ompi ? o.bcast(buf, n, o.byte, 0, o.world) : m.bcast(buf, n, m.byte, 0, m.world);
  }
  int abort(int code) { return ompi ? o.abort(o.world, code) : m.abort(m.world, code); }
  int returnErrors() {
    return ompi ? o.setErrhandler(o.world, o.errorsReturn)
                : m.setErrhandler(m.world, m.errorsReturn);
  }

  /// "MPI_Bcast failed with MPI error 5 (MPI_ERR_...)".
  Status error(ErrorCode code, const char* call, int rc) const {
    std::string what = std::string(call) + " failed with MPI error " + std::to_string(rc);
    char text[kMaxErrorString + 1] = {};
    int len = 0;
    if (errorString && errorString(rc, text, &len) == kMpiSuccess && len > 0)
      what += " (" + firstLine(std::string(text, size_t(std::min(len, kMaxErrorString)))) + ")";
    return Status(code, what);
  }
};

#define HGP_MPI_TRY(code, name, call)                                                              \
  do {                                                                                             \
    int _hgp_rc = (call);                                                                          \
    if (_hgp_rc != kMpiSuccess) return api.error(code, name, _hgp_rc);                             \
  } while (0)

Expected<std::unique_ptr<MpiBootstrap>> MpiBootstrap::start(const std::string& launcher, int rank,
                                                            int ranks) {
  std::vector<std::string> names;
  if (const char* forced = std::getenv("HGPC_MPI_LIBRARY"); forced && *forced)
    names = {forced};
  else if (launcher == "pmi")
    names = {"libmpi.so.12", "libmpich.so.12", "libmpi.so"};
  else
    names = {"libmpi.so.40", "libmpi.so"};
  std::vector<DynamicLibrary::Failure> failed;
  std::optional<DynamicLibrary> opened =
      DynamicLibrary::openFirst(names, DynamicLibrary::Scope::Global, &failed);
  if (!opened)
    return Status(
        ErrorCode::Usage,
        "under mpirun without --rendezvous the NCCL id is broadcast with MPI, and no MPI "
        "library could be loaded (" +
            DynamicLibrary::reasonsOf(failed) +
            "); pass --rendezvous DIR (a directory "
            "every rank can read), or install the MPI that mpirun belongs to (its libmpi on "
            "the library path, or HGPC_MPI_LIBRARY=PATH)");
  // The library stays loaded for the life of the process: MPI libraries do not support dlclose.
  const DynamicLibrary& lib = *opened;
  const std::string& name = lib.name();
  std::unique_ptr<MpiBootstrap> b(new MpiBootstrap());
  b->api_ = std::make_unique<Api>();
  b->rank_ = rank;
  Api& api = *b->api_;
  HGP_TRY(resolve(lib, name, "MPI_Initialized", api.initialized));
  HGP_TRY(resolve(lib, name, "MPI_Finalized", api.finalized));
  HGP_TRY(resolve(lib, name, "MPI_Init", api.init));
  HGP_TRY(resolve(lib, name, "MPI_Finalize", api.finalize));
  HGP_TRY(resolve(lib, name, "MPI_Error_string", api.errorString));
  // MPI-3 allows MPI_Get_library_version before MPI_Init; it only names the library here.
  std::string version;
  int (*libraryVersion)(char*, int*) = nullptr;
  if (resolve(lib, name, "MPI_Get_library_version", libraryVersion).isOk()) {
    std::vector<char> text(kMaxLibraryVersion + 1, '\0');
    int len = 0;
    if (libraryVersion(text.data(), &len) == kMpiSuccess && len > 0)
      version = firstLine(std::string(text.data(), size_t(std::min(len, kMaxLibraryVersion))),
                          /*comma=*/true);
  }
  b->library_ = name + (version.empty() ? "" : " (" + version + ")");

  if (void* world = lib.symbol("ompi_mpi_comm_world")) {
    api.ompi = true;
    HGP_TRY(api.resolveHandleCalls(lib, name, api.o));
    api.o.world = world;
    api.o.byte = lib.symbol("ompi_mpi_byte");
    api.o.errorsReturn = lib.symbol("ompi_mpi_errors_return");
    if (!api.o.byte || !api.o.errorsReturn)
      return Status(ErrorCode::Usage, b->library_ +
                                          " has ompi_mpi_comm_world but not "
                                          "ompi_mpi_byte and ompi_mpi_errors_return; an Open MPI "
                                          "this old is not supported, pass --rendezvous DIR");
  } else if ((name.size() > 6 && name.compare(name.size() - 6, 6, ".so.12") == 0) ||
             version.find("MPICH") != std::string::npos ||
             version.find("Intel(R) MPI") != std::string::npos ||
             version.find("MVAPICH") != std::string::npos) {
    HGP_TRY(api.resolveHandleCalls(lib, name, api.m));
    api.m.world = kMpichCommWorld;
    api.m.byte = kMpichByte;
    api.m.errorsReturn = kMpichErrorsReturn;
  } else {
    return Status(ErrorCode::Usage,
                  b->library_ + " is neither Open MPI (no ompi_mpi_comm_world) "
                                "nor of MPICH's ABI (libmpi.so.12); hgpc knows no other MPI "
                                "ABI, pass --rendezvous DIR instead");
  }

  int finalized = 0, initialized = 0;
  HGP_MPI_TRY(ErrorCode::Usage, "MPI_Finalized", api.finalized(&finalized));
  if (finalized) return Status(ErrorCode::Usage, "MPI was already finalized in this process");
  HGP_MPI_TRY(ErrorCode::Usage, "MPI_Initialized", api.initialized(&initialized));
  if (!initialized) {
    HGP_MPI_TRY(ErrorCode::PeerFailed, "MPI_Init", api.init(nullptr, nullptr));
    b->initializedHere_ = true;
  }
  // MPI_COMM_WORLD's default handler kills the process on any error; return codes instead.
  HGP_MPI_TRY(ErrorCode::PeerFailed, "MPI_Comm_set_errhandler", api.returnErrors());
  int mpiRank = -1, mpiRanks = -1;
  HGP_MPI_TRY(ErrorCode::PeerFailed, "MPI_Comm_rank", api.commRank(&mpiRank));
  HGP_MPI_TRY(ErrorCode::PeerFailed, "MPI_Comm_size", api.commSize(&mpiRanks));
  if (mpiRank != rank || mpiRanks != ranks)
    return Status(ErrorCode::Usage,
                  b->library_ + " says this process is rank " + std::to_string(mpiRank) + " of " +
                      std::to_string(mpiRanks) + ", but the launcher's environment says rank " +
                      std::to_string(rank) + " of " + std::to_string(ranks) +
                      "; load the MPI library of the mpirun that started the ranks "
                      "(HGPC_MPI_LIBRARY=PATH), or pass --rendezvous DIR");
  return b;
}

MpiBootstrap::~MpiBootstrap() {
  if (initializedHere_ && !finished_) api_->finalize();
}

Status MpiBootstrap::broadcast(std::string& bytes) {
  Api& api = *api_;
  uint64_t size = rank_ == 0 ? bytes.size() : 0;
  HGP_MPI_TRY(ErrorCode::PeerFailed, "MPI_Bcast", api.bcastFromRoot(&size, int(sizeof size)));
  if (size > kMaxBroadcast)
    return Status(ErrorCode::PeerFailed,
                  "rank 0 announced " + std::to_string(size) + " bytes over MPI, not an NCCL id");
  bytes.resize(size_t(size));
  if (size > 0)
    HGP_MPI_TRY(ErrorCode::PeerFailed, "MPI_Bcast", api.bcastFromRoot(bytes.data(), int(size)));
  return Status::ok();
}

Status MpiBootstrap::finalize() {
  if (finished_ || !initializedHere_) {
    finished_ = true;
    return Status::ok();
  }
  finished_ = true;
  Api& api = *api_;
  HGP_MPI_TRY(ErrorCode::PeerFailed, "MPI_Finalize", api.finalize());
  return Status::ok();
}

void MpiBootstrap::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  finished_ = true;
  api_->abort(code);
  std::_Exit(code);
}

} // namespace hgp
