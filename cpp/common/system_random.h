// Random numbers from the system's source (std::random_device), for names and ids that must not
// repeat (temporary files, run ids, a save's id): never torch's generators, whose streams the
// training follows and must keep in step with Python's.
#pragma once

#include <cstdint>
#include <string>

namespace acc {

// 64 random bits; safe from any thread.
uint64_t system_random_bits();
// Python's uuid.uuid4().hex: 32 lowercase hex digits of a random (version 4, RFC 4122 variant) UUID,
// from a generator of the calling thread that the system's source seeds (ids by the thousand cost
// no system call each).
std::string uuid4_hex();
// Python's str(uuid.uuid4()): the same digits in groups of 8-4-4-4-12, joined by '-'.
std::string uuid4_text();

}  // namespace acc
