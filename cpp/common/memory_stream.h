// A std::istream over a block of memory, read in place (no copy), seekable: what libtorch's readers
// take in place of a file's path, so that they read the bytes that were checked.
#pragma once

#include <istream>
#include <streambuf>

namespace acc {

class MemoryStream : public std::istream {
 public:
  MemoryStream(const char* data, size_t size) : std::istream(nullptr), buffer_(data, size) { rdbuf(&buffer_); }

 private:
  class Buffer : public std::streambuf {
   public:
    Buffer(const char* data, size_t size) {
      char* begin = const_cast<char*>(data);  // (only read: the get area)
      setg(begin, begin, begin + size);
    }

   protected:
    pos_type seekoff(off_type offset, std::ios_base::seekdir from, std::ios_base::openmode which) override {
      const off_type size = egptr() - eback();
      const off_type base = from == std::ios_base::beg ? 0 : from == std::ios_base::cur ? gptr() - eback() : size;
      if (!(which & std::ios_base::in) || offset < -base || offset > size - base) return pos_type(off_type(-1));
      setg(eback(), eback() + base + offset, egptr());
      return pos_type(base + offset);
    }
    pos_type seekpos(pos_type position, std::ios_base::openmode which) override {
      return seekoff(off_type(position), std::ios_base::beg, which);
    }
  };
  Buffer buffer_;
};

}  // namespace acc
