// Destinations.h - the files a run will write, checked before its first step.
//
// A run writes --save at the end, --checkpoint-dir after every epoch, --metrics every few steps
// and --trace or --profile at the third step. A destination that cannot be written (a folder
// that does not exist, a read-only folder, a path that is a folder) used to fail only when the
// file was due, after the training it was meant to keep had been done. The runner checks them
// all when it starts: missing parent folders are created, as `mkdir -p` would, and a folder it
// cannot write into is an i/o error (exit 4) that names the flag.
#pragma once

#include "runtime/support/Status.h"

#include <string>

namespace hgp {

/// Checks that the file `path`, given to `flag`, can be written: creates its missing parent
/// folders and fails when `path` is a folder or its folder is not writable. An empty path
/// (the flag was not given) is fine.
Status prepareFileDestination(const std::string& path, const std::string& flag);

/// Checks that files can be written into the folder `dir`, given to `flag`, creating it and its
/// parents when missing. An empty path is fine.
Status prepareFolderDestination(const std::string& dir, const std::string& flag);

} // namespace hgp
