// Running the programs as a user would, from the mounted tests: a shell command's exit code
// and output, and waiting for a daemon to let go of its members.
#pragma once

#include <string>

namespace stripefs::test {

struct Command {
  int status;          // the exit code; -1 if the command did not exit (a signal)
  std::string output;  // standard output and error together
};

// Runs `command` through the shell.
Command run(const std::string& command);

// Waits (up to a minute) until no process holds the flock a stripefs daemon keeps on
// `member` while it runs: true once free.
bool wait_for_unlock(const std::string& member);

}  // namespace stripefs::test
