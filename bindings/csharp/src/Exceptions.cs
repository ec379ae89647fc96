// The exceptions of failed calls into accelerate: one type per acc_status, all AccelerateException,
// carrying the library's message. Names are prefixed so they never shadow System's (TimeoutException).
using System;
using System.Collections.Generic;

namespace Accelerate {

public class AccelerateException : Exception {
  public Status Status { get; }

  public AccelerateException(Status status, string message) : base(message) { Status = status; }

  // `text` as given; one holding '\0' is refused (the C API would silently read up to it).
  internal static string NoNul(string text) {
    if (text != null && text.IndexOf('\0') >= 0)
      throw new AccelerateInvalidArgumentException("a string holds a NUL character (\\0), which the library cannot take: \"" +
                                                   text.Replace("\0", "\\0") + "\"");
    return WellFormed(text);
  }

  // The text with what the library's UTF-8 strings cannot carry written out: a NUL as a backslash and
  // a zero, a lone UTF-16 surrogate as its escape (\uD83D). For messages, where the user's text
  // matters more than its exact characters.
  internal static string WrittenOut(string text) {
    var written = new System.Text.StringBuilder(text.Length);
    for (int i = 0; i < text.Length; ++i) {
      char c = text[i];
      if (char.IsHighSurrogate(c) && i + 1 < text.Length && char.IsLowSurrogate(text[i + 1])) {
        written.Append(c).Append(text[++i]);
      } else if (char.IsSurrogate(c)) {
        written.Append("\\u").Append(((int)c).ToString("X4"));
      } else if (c == '\0') {
        written.Append("\\0");
      } else {
        written.Append(c);
      }
    }
    return written.ToString();
  }

  // A string that UTF-8 can carry: a lone UTF-16 surrogate would be replaced on the way (by U+FFFD or
  // '?'), so the library would see another name than the caller's; refused instead.
  internal static string WellFormed(string text) {
    if (text == null) return text;
    for (int i = 0; i < text.Length; ++i) {
      if (char.IsHighSurrogate(text[i]) && i + 1 < text.Length && char.IsLowSurrogate(text[i + 1])) {
        ++i;
      } else if (char.IsSurrogate(text[i])) {
        throw new AccelerateInvalidArgumentException("a string holds a lone UTF-16 surrogate (U+" + ((int)text[i]).ToString("X4") +
                                                     " at index " + i + "), which UTF-8 cannot carry");
      }
    }
    return text;
  }

  // The exception type of a status (the raise delegate of NativePINVOKE and the layer use it).
  internal static AccelerateException FromStatus(Status status, string message) {
    switch (status) {
      case Status.InvalidArgument: return new AccelerateInvalidArgumentException(message);
      case Status.InvalidHandle: return new AccelerateInvalidHandleException(message);
      case Status.NotInitialized: return new AccelerateNotInitializedException(message);
      case Status.Unsupported: return new AccelerateUnsupportedException(message);
      case Status.OutOfMemory: return new AccelerateOutOfMemoryException(message);
      case Status.Timeout: return new AccelerateTimeoutException(message);
      case Status.Aborted: return new AccelerateAbortedException(message);
      case Status.Distributed: return new AccelerateDistributedException(message);
      case Status.IO: return new AccelerateIOException(message);
      case Status.VersionMismatch: return new AccelerateVersionMismatchException(message);
      default: return new AccelerateInternalException(message);
    }
  }
}

/// A bad value: null, wrong shape or dtype, unknown option.
public class AccelerateInvalidArgumentException : AccelerateException {
  public AccelerateInvalidArgumentException(string message) : base(Status.InvalidArgument, message) {}
}
/// A null or released handle, e.g. an object used after Dispose.
public class AccelerateInvalidHandleException : AccelerateException {
  public AccelerateInvalidHandleException(string message) : base(Status.InvalidHandle, message) {}
}
/// A precondition is not met.
public class AccelerateNotInitializedException : AccelerateException {
  public AccelerateNotInitializedException(string message) : base(Status.NotInitialized, message) {}
}
/// The feature is not built in or not available on this machine.
public class AccelerateUnsupportedException : AccelerateException {
  public AccelerateUnsupportedException(string message) : base(Status.Unsupported, message) {}
}
/// Host or device memory exhausted.
public class AccelerateOutOfMemoryException : AccelerateException {
  public AccelerateOutOfMemoryException(string message) : base(Status.OutOfMemory, message) {}
}
/// A collective or rendezvous did not finish in time.
public class AccelerateTimeoutException : AccelerateException {
  public AccelerateTimeoutException(string message) : base(Status.Timeout, message) {}
}
/// A peer process failed; a restart may recover.
public class AccelerateAbortedException : AccelerateException {
  public AccelerateAbortedException(string message) : base(Status.Aborted, message) {}
}
/// Any other error of the process group.
public class AccelerateDistributedException : AccelerateException {
  public AccelerateDistributedException(string message) : base(Status.Distributed, message) {}
}
/// A file could not be read or written, or is corrupt; also a failed callback.
public class AccelerateIOException : AccelerateException {
  public AccelerateIOException(string message) : base(Status.IO, message) {}
}
/// The binding and the loaded library disagree on the ABI version.
public class AccelerateVersionMismatchException : AccelerateException {
  public AccelerateVersionMismatchException(string message) : base(Status.VersionMismatch, message) {}
}
/// A bug in the library.
public class AccelerateInternalException : AccelerateException {
  public AccelerateInternalException(string message) : base(Status.Internal, message) {}
}

/// Checks of managed arguments, before anything reads them.
internal static class Arg {
  internal static T NotNull<T>(T value, string name) where T : class {
    if (value == null) throw new System.ArgumentNullException(name);
    return value;
  }
  // An index or count (a size_t in C): a negative one is refused by its own value.
  internal static long NotNegative(long value, string name) {
    if (value < 0) throw new AccelerateInvalidArgumentException(name + " is negative: " + value);
    return value;
  }
  // Each string's UTF-8 bytes and a NUL: a string may hold any other character (a newline too).
  internal static byte[] NulJoined(string what, IEnumerable<string> strings) {
    var bytes = new List<byte>();
    foreach (var s in NotNull(strings, what + "s")) {
      if (s == null) throw new AccelerateInvalidArgumentException(what + " is null");
      if (s.IndexOf('\0') >= 0)
        throw new AccelerateInvalidArgumentException(what + " \"" + s.Replace("\0", "\\0") + "\" holds a NUL character");
      bytes.AddRange(System.Text.Encoding.UTF8.GetBytes(AccelerateException.WellFormed(s)));
      bytes.Add(0);
    }
    return bytes.ToArray();
  }
}

}
