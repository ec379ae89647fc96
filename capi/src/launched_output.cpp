// Under `accelerate launch`, each process writes into the launcher's pipe, where C's stdio keeps
// stdout in a block buffer: a program's printf lines would show only at its exit, and be lost when
// the job is stopped. Where the launcher's own output is a terminal, which would have made stdout
// line-buffered, it says so (ACCELERATE_STDOUT_LINE_BUFFERED=1), and stdout is made line-buffered
// here, as the library loads: before the program's main has written anything.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

__attribute__((constructor)) void line_buffer_stdout_under_a_launcher_on_a_terminal() {
  const char* asked = std::getenv("ACCELERATE_STDOUT_LINE_BUFFERED");
  if (asked && std::strcmp(asked, "1") == 0) std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
}

}  // namespace
