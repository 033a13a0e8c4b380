// Interrupt.h - SIGINT and SIGTERM end a training run at a step boundary, with a checkpoint.
//
// Ctrl-C, `timeout`, Slurm preemption and a closed terminal all send SIGINT or SIGTERM. Killed
// mid-run, a run would lose everything since its last checkpoint. The runner installs these
// handlers when training starts: the first signal only sets a flag, the trainer checks the flag
// after every step, finishes the step in flight, writes a checkpoint and exits 128 + the signal
// number (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by it. A second
// signal while the first is being handled takes the default action (the process ends at once),
// so that a run that hangs can still be stopped.
#pragma once

#include <string>
#include <vector>

namespace hgp {

/// Installs the SIGINT and SIGTERM handlers (async-signal-safe: they only set a flag, or, for a
/// second signal, restore the default action and raise it again).
void installInterruptHandlers();

/// The signal number received since installInterruptHandlers(), or 0.
int pendingInterrupt();

/// The exit code of a run ended by signal `sig`: 128 + sig.
int interruptExitCode(int sig);

/// The command line that continues a run: `argv` without its --resume, --steps and --epochs
/// options (in either the `--flag value` or the `--flag=value` form), then `--resume
/// checkpoint` and `budget` (for example "--steps 17"), each word quoted for a POSIX shell
/// where it needs it.
std::string resumeCommand(const std::vector<std::string>& argv, const std::string& checkpoint,
                          const std::string& budget);

} // namespace hgp
