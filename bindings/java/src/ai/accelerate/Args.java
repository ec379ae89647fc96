package ai.accelerate;

/** Checks and encodings of arguments before they cross to the library. */
final class Args {
  private Args() {}

  /** An index or count (a size_t in C, a long here): a negative one is refused by its own value,
   *  instead of reaching the library as a number near 2^64. */
  static long notNegative(long value, String name) {
    if (value < 0) throw new InvalidArgumentException(name + " is negative: " + value);
    return value;
  }

  /** Refuses a string holding a NUL (it would cut the text short in the library), before anything
   *  is made for the call it belongs to. */
  static String noNul(String what, String s) {
    if (s != null && s.indexOf('\0') >= 0)
      throw new InvalidArgumentException(what + " \"" + s.replace("\0", "\\0") + "\" holds a NUL character");
    return s;
  }

  /** The text with what the library's UTF-8 strings cannot carry written out: a NUL as a backslash and
   *  a zero, a lone UTF-16 surrogate as its escape (a backslash, u and four hex digits). For messages,
   *  where the user's text matters more than its exact characters. */
  static String writtenOut(String s) {
    StringBuilder out = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); ++i) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
        out.append(c).append(s.charAt(++i));
      } else if (Character.isSurrogate(c)) {
        out.append(String.format("\\u%04X", (int) c));
      } else if (c == '\0') {
        out.append("\\0");
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }

  /** Refuses a string holding a lone UTF-16 surrogate: UTF-8 cannot carry it (Java's encoder would
   *  put '?' in its place, so the library would see another name than the caller's). */
  static String wellFormed(String s) {
    if (s == null) return s;
    for (int i = 0; i < s.length(); ++i) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
        ++i;
      } else if (Character.isSurrogate(c)) {
        throw new InvalidArgumentException(String.format(
            "a string holds a lone UTF-16 surrogate (U+%04X at index %d), which UTF-8 cannot carry", (int) c, i));
      }
    }
    return s;
  }

  /** Each string's UTF-8 bytes and a NUL: a string may hold any other character (a newline too). */
  static byte[] nulJoined(String what, Iterable<String> strings) {
    java.util.Objects.requireNonNull(strings, what + "s");
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
    for (String s : strings) {
      if (s == null) throw new InvalidArgumentException(what + " is null");
      byte[] encoded = wellFormed(noNul(what, s)).getBytes(java.nio.charset.StandardCharsets.UTF_8);
      bytes.write(encoded, 0, encoded.length);
      bytes.write(0);
    }
    return bytes.toByteArray();
  }

  static byte[] nulJoined(String what, String[] strings) {
    return nulJoined(what, java.util.Arrays.asList(strings));
  }
}
