// MpiBootstrap.h - rank 0's NCCL id sent to every rank with MPI, when the executable runs under
// mpirun without --rendezvous (docs/distributed.md).
//
// The MPI library is loaded at run time with dlopen, the way runtime/cuda/Nccl.cpp loads NCCL.
// The executable links no MPI, so it still starts on a machine without one, and it needs no MPI
// headers at build time. It calls MPI_Initialized, MPI_Init, MPI_Comm_rank, MPI_Comm_size,
// MPI_Bcast, MPI_Finalized, MPI_Finalize and MPI_Abort, and MPI_Comm_set_errhandler with
// MPI_Error_string, so that a failed call returns an error code that becomes a readable message
// instead of killing the process; MPI_Get_library_version names the library in messages.
//
// Two MPI ABIs are supported. In Open MPI (libmpi.so.40) a handle is a pointer: MPI_COMM_WORLD
// and MPI_BYTE are the addresses of the library's symbols ompi_mpi_comm_world and ompi_mpi_byte.
// In MPICH and the libraries that share its ABI (libmpi.so.12: Intel MPI, MVAPICH, Cray MPICH) a
// handle is an int with fixed values. The library must be the one that belongs to the mpirun that
// started the process; start() checks that MPI's rank and size agree with what the launcher's
// environment said, which catches a library of another MPI (it would run as a singleton).
//
// HGPC_MPI_LIBRARY names the library to load instead of the default search (libmpi.so.40 then
// libmpi.so under Open MPI's mpirun; libmpi.so.12, libmpich.so.12 then libmpi.so under a PMI
// launcher such as MPICH's hydra).
//
// Only the id travels over MPI. After the broadcast NCCL is the only transport; MPI stays
// initialized until the run ends, then finalize() (a successful run) or abort() (a failed rank:
// the launcher then stops every rank of the job, as the --gpus launcher does) ends it.
#pragma once

#include "runtime/support/Status.h"

#include <memory>
#include <string>

namespace hgp {

class MpiBootstrap {
public:
  /// Loads the MPI library, initializes MPI unless the process already did, and checks that
  /// MPI_COMM_WORLD has `ranks` ranks and that this process is `rank`. `launcher` is
  /// RankEnv::launcher ("openmpi" or "pmi"); it orders the libraries tried. A missing library
  /// is a usage error whose message says to pass --rendezvous DIR or install MPI.
  static Expected<std::unique_ptr<MpiBootstrap>> start(const std::string& launcher, int rank,
                                                       int ranks);
  /// Finalizes MPI if this object initialized it and neither finalize() nor abort() ran.
  ~MpiBootstrap();
  MpiBootstrap(const MpiBootstrap&) = delete;
  MpiBootstrap& operator=(const MpiBootstrap&) = delete;

  /// Every rank ends with rank 0's `bytes`: MPI_Bcast of the length, then of the bytes. A
  /// collective: every rank must call it.
  Status broadcast(std::string& bytes);

  /// MPI_Finalize, when this object initialized MPI (a collective: all ranks must reach it).
  /// Call it once at the end of a successful run.
  Status finalize();

  /// MPI_Abort(MPI_COMM_WORLD, code): the launcher stops every rank of the job and exits with a
  /// non-zero code. Used when this rank fails; exits with `code` if MPI_Abort returns.
  [[noreturn]] void abort(int code);

  /// The library loaded and, when it says, its version ("libmpi.so.40 (Open MPI v4.1.4, ...)").
  const std::string& library() const { return library_; }

private:
  MpiBootstrap() = default;
  struct Api;
  std::unique_ptr<Api> api_;
  std::string library_;
  int rank_ = 0;
  bool initializedHere_ = false, finished_ = false;
};

} // namespace hgp
