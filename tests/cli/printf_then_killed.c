/* A process that prints a line with printf (no flush) and is then killed: under `accelerate launch`
 * on a terminal the line must reach the console (the library line-buffers stdout there). */
#include <signal.h>
#include <stdio.h>

#include "accelerate.h"

int main(void) {
  int major = 0, minor = 0, patch = 0;
  acc_version(&major, &minor, &patch); /* the library is loaded, and with it its stdout setting */
  printf("printed with the library %d.%d.%d\n", major, minor, patch);
  raise(SIGKILL);
  return 0;
}
