/* Preloaded (LD_PRELOAD) into a 2-process job by the dist_fault_after_publish test: right after a
 * rename onto a path holding $ACC_TEST_PUBLISH_MATCH (the checkpoint folder being published), the
 * process that made it sends SIGUSR1 to the process whose pid is in "<that path>.peer_pid", if there is
 * one (the peer exits on it), and waits for it to be gone: the save's last exchange of outcomes then
 * finds the peer dead after the publish. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void end_peer_if_published(const char *newpath) {
  const char *match = getenv("ACC_TEST_PUBLISH_MATCH");
  char pid_file[4096];
  if (!match || !strstr(newpath, match) || snprintf(pid_file, sizeof pid_file, "%s.peer_pid", newpath) >= 4096) return;
  FILE *f = fopen(pid_file, "r");
  long pid = 0;
  if (!f) return;
  if (fscanf(f, "%ld", &pid) != 1) pid = 0;
  fclose(f);
  if (pid <= 0 || kill((pid_t)pid, SIGUSR1) != 0) return;
  /* Gone once its pid no longer answers, or once the launcher reaped it (up to 5 s). */
  for (int i = 0; i < 500 && kill((pid_t)pid, 0) == 0; ++i) {
    struct timespec ten_ms = {0, 10 * 1000 * 1000};
    nanosleep(&ten_ms, NULL);
  }
  /* A zombie still answers: give its sockets' closing time to reach us. */
  struct timespec settle = {0, 200 * 1000 * 1000};
  nanosleep(&settle, NULL);
}

int rename(const char *oldpath, const char *newpath) {
  int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  const int result = real(oldpath, newpath);
  if (result == 0) end_peer_if_published(newpath);
  return result;
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
  int (*real)(int, const char *, int, const char *, unsigned int) =
      (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT, "renameat2");
  const int result = real(olddirfd, oldpath, newdirfd, newpath, flags);
  if (result == 0) end_peer_if_published(newpath);
  return result;
}
