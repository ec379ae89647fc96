/* Preloaded (LD_PRELOAD) into a process that saves files: the process kills itself (SIGKILL) right
 * after its Nth call of one kind whose path holds a text, so that a test can stop a save at every
 * step of its sequence of file operations and look at what is left.
 *   ACC_TEST_KILL_CALL   "open" (open, open64, openat, fopen, fopen64 for writing), "rename" or "remove"
 *                        (remove, unlink)
 *   ACC_TEST_KILL_MATCH  a text the path holds (the new path of a rename)
 *   ACC_TEST_KILL_AT     N, counting from 1 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void after(const char *call, const char *path) {
  const char *kind = getenv("ACC_TEST_KILL_CALL"), *match = getenv("ACC_TEST_KILL_MATCH"), *at = getenv("ACC_TEST_KILL_AT");
  static long seen = 0;
  if (!kind || !match || !at || !path || strcmp(kind, call) != 0 || !strstr(path, match)) return;
  if (++seen == atol(at)) kill(getpid(), SIGKILL);
}

#define REAL(name, type) ((type)dlsym(RTLD_NEXT, name))

static int writes(int flags) { return (flags & (O_WRONLY | O_RDWR)) != 0; }
static int writes_mode(const char *mode) { return mode && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+')); }

int open(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = (mode_t)va_arg(args, int);
  va_end(args);
  const int fd = REAL("open", int (*)(const char *, int, ...))(path, flags, mode);
  if (fd >= 0 && writes(flags)) after("open", path);
  return fd;
}

int open64(const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = (mode_t)va_arg(args, int);
  va_end(args);
  const int fd = REAL("open64", int (*)(const char *, int, ...))(path, flags, mode);
  if (fd >= 0 && writes(flags)) after("open", path);
  return fd;
}

int openat(int dirfd, const char *path, int flags, ...) {
  va_list args;
  va_start(args, flags);
  const mode_t mode = (mode_t)va_arg(args, int);
  va_end(args);
  const int fd = REAL("openat", int (*)(int, const char *, int, ...))(dirfd, path, flags, mode);
  if (fd >= 0 && writes(flags)) after("open", path);
  return fd;
}

FILE *fopen(const char *path, const char *mode) {
  FILE *f = REAL("fopen", FILE * (*)(const char *, const char *))(path, mode);
  if (f && writes_mode(mode)) after("open", path);
  return f;
}

FILE *fopen64(const char *path, const char *mode) {
  FILE *f = REAL("fopen64", FILE * (*)(const char *, const char *))(path, mode);
  if (f && writes_mode(mode)) after("open", path);
  return f;
}

int rename(const char *from, const char *to) {
  const int result = REAL("rename", int (*)(const char *, const char *))(from, to);
  if (result == 0) after("rename", to);
  return result;
}

int remove(const char *path) {
  const int result = REAL("remove", int (*)(const char *))(path);
  if (result == 0) after("remove", path);
  return result;
}

int unlink(const char *path) {
  const int result = REAL("unlink", int (*)(const char *))(path);
  if (result == 0) after("remove", path);
  return result;
}
