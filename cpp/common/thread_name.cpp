#include "common/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace acc {

void name_this_thread(const char* name) {
  const std::string kept(name, std::min<size_t>(std::strlen(name), 15));
  (void)::pthread_setname_np(::pthread_self(), kept.c_str());  // a name is a courtesy: failure is harmless
}

}  // namespace acc
