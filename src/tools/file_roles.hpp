// The tools' guard against an output that would overwrite an input or another
// output: `hogwild_train --train data.svm --metrics data.svm` truncated the training
// file before it was read, and `hogwild_data convert a.svm --out a.svm` replaced the
// text with its cache. Checked once the options are parsed, before anything is
// opened for writing.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace hogwild::tools {

struct FileRole {
  std::string_view option;  // "--train"
  std::string path;         // empty: not given
  // Only for an output: the input option whose file it may replace (--checkpoint
  // writes over the --resume file it continues from).
  std::string_view may_replace = {};
  // Only for an output: what probe_output's message calls it (default: `option`).
  std::string_view what = {};
};

// The labels file that IDX images at `images` are read with when none is named
// (`given` empty): the name with images-idx3 as labels-idx1, gzip'ed or not
// (hogwild::idx_labels_path_for). An input as much as a named one, under `option`
// ("--train-labels (found beside --train)"). None where a file is named or the
// images' name has no images-idx3.
std::vector<FileRole> labels_beside(std::string_view option, const std::string& images,
                                    const std::string& given);

// True when a and b are one regular file (the same inode, through any path or
// link), or, where neither exists yet, the same path. A device, FIFO or "-" (the
// standard stream) never counts: writing it destroys nothing.
bool same_file(const std::string& a, const std::string& b);

// Standard input, output or error closed by the caller (`tool >&-`): /dev/null is
// opened in its place, first thing in main(), so that no later descriptor (a file, a
// socket, the fork server's channel) takes the number and is written as "standard
// output". check_outputs then refuses an output given as standard output.
void reopen_closed_standard_streams() noexcept;

// SIGINT, SIGTERM or SIGHUP while an output is written (hogwild_data's, hogwild_predict's):
// its temporary is removed, then the signal ends the process as it would have (exit
// 130, 143 or 129 in a shell). A signal the caller ignores (a background job's
// SIGINT, nohup's SIGHUP) stays ignored.
void remove_temporaries_on_stop() noexcept;

// Throws hogwild::ConfigError (exit 2) naming both options when an output is the
// same file as an input (other than its may_replace) or as another output, or is
// standard output where that was closed (reopen_closed_standard_streams), and when
// standard output itself is an input's file (`>> model.st`); then
// probes each output in turn (probe_output), then claims it (claim_output, waiting up
// to `wait` for another run's claim to end).
// `taken`, where given, gets the claims made (for release_claims).
void check_outputs(const std::vector<FileRole>& inputs, const std::vector<FileRole>& outputs,
                   std::chrono::milliseconds wait = {}, std::vector<int>* taken = nullptr);

// Fails now, not after the training, where `what` ("the summary") could not be
// written to `path` the way the tools write it (a temporary beside it, renamed):
// no such folder, a folder in its place, no permission, a read-only file system.
// Creates and removes that temporary to find out. A device or pipe is written in
// place and not probed. Throws hogwild::IoError (exit 2).
void probe_output(std::string_view what, const std::string& path);

// Claims `path` (an output written to a file) for this process and its children
// until they exit, so that a second run given the same file is refused at its start
// (ConfigError, exit 2, naming the run that holds it) rather than the last writer
// winning. The claim is an abstract-namespace Unix socket named by the file's
// absolute path: nothing on disk, and gone with the processes however they end.
// check_outputs claims each output. A descriptor or device is not claimed. With a
// `wait`, a claim another process holds is retried until it ends or `wait` has
// passed (said once on stderr: a resumed sweep's run waits for the killed sweep's
// run of that cell to finish dying).
void claim_output(std::string_view option, const std::string& path,
                  std::chrono::milliseconds wait = {}, std::vector<int>* taken = nullptr);

// Lets go of the claims in `taken` (check_outputs'): a library caller's run has
// ended, and its process goes on (a tool's claims end with it). Another thread's
// run keeps its own.
void release_claims(const std::vector<int>& taken) noexcept;

}  // namespace hogwild::tools
