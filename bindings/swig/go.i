/* go.i — Go specifics of accelerate.i. Go has no exceptions: each method has a hidden trailing
 * `swig_err *string`; %exception parks the error (code:message) and the same wrapper call writes
 * it there, so no goroutine ever reads a thread-local of another call. Nothing panics. */

%exception {
  try {
    accswig::require_no_go_nul();
    $action
  } catch (const accswig::Error &e) {
    accswig::park_go_error(e.code, e.message);
  } catch (const std::exception &e) {
    accswig::park_go_error(ACC_ERR_INTERNAL, e.what());
  }
}

%typemap(in) std::string *swig_err (std::string temp) %{
  accswig::take_go_error();
  $1 = &temp;
%}
%typemap(argout, fragment="AllocateString") std::string *swig_err %{
  {
    std::string e = accswig::take_go_error();
    if (!e.empty()) *$input = Swig_AllocateString(e.data(), e.size());
  }
%}

/* Only a failed call wrote a (C-allocated) string; the caller always passes "". */
%typemap(goargout, fragment="CopyString") std::string *swig_err %{
  if $input != nil && len(*$input) > 0 {
    *$1 = swigCopyString(*$input)
  }
%}

/* Strings: copied with a NUL for the call, as SWIG does; one holding a NUL is refused by the
 * wrapper's %exception (the C API would silently read up to it). */
%typemap(in) const char * (char *copy) %{
  copy = (char *)malloc($input.n + 1);
  memcpy(copy, $input.p, $input.n);
  copy[$input.n] = '\0';
  if (memchr(copy, 0, $input.n)) accswig::go_string_held_nul() = true;
  $1 = copy;
%}
%typemap(freearg) const char * %{ free(copy$argnum); %}

/* Slices: valid for the call only (the library copies what it keeps). */
%define ACC_GO_SLICE(CTYPE, GOTYPE)
%typemap(gotype) (const CTYPE *data, size_t n), (CTYPE *dst, size_t n) "[]GOTYPE"
%typemap(in) (const CTYPE *data, size_t n), (CTYPE *dst, size_t n) %{
  $1 = ($1_ltype)$input.array;
  $2 = (size_t)$input.len;
%}
%enddef
ACC_GO_SLICE(float, float32)
ACC_GO_SLICE(double, float64)
ACC_GO_SLICE(int64_t, int64)
ACC_GO_SLICE(int32_t, int32)
ACC_GO_SLICE(uint8_t, byte)
%apply (const uint8_t *data, size_t n) { (const uint8_t *names, size_t namesSize) }
%apply (const uint8_t *data, size_t n) { (const uint8_t *texts, size_t textsSize) }
%apply (const int64_t *data, size_t n) { (const int64_t *shape, size_t ndim) }
%apply (const int64_t *data, size_t n) { (const int64_t *sizes, size_t nsizes) }
%apply (const int64_t *data, size_t n) { (const int64_t *dims, size_t ndim) }

/* A member named iter would clash with the C function acc_dataloader_iter (see handles.i). */
%rename(Iter) acc_dataloader::iter_;
