/* java.i — Java specifics of accelerate.i: errors become ai.accelerate exceptions in the native
 * call that failed, arrays are Java arrays, and handle proxies are AutoCloseable with a Cleaner as
 * the safety net (no finalizers). */

%{
/* Strings cross as real UTF-8. JNI's own string calls speak "modified UTF-8", which writes a
 * character outside the BMP as two 3-byte surrogates (the library would see invalid UTF-8) and
 * reads the library's 4-byte sequences as garbage; so the bytes go through String's own codec. */
static jstring accswig_java_string(JNIEnv *jenv, const char *utf8, size_t size) {
  jbyteArray bytes = jenv->NewByteArray((jsize)size);
  if (!bytes) return nullptr;
  jenv->SetByteArrayRegion(bytes, 0, (jsize)size, reinterpret_cast<const jbyte *>(utf8));
  jclass string_class = jenv->FindClass("java/lang/String");
  jstring charset = jenv->NewStringUTF("UTF-8");
  jstring result = nullptr;
  if (string_class && charset) {
    jmethodID init = jenv->GetMethodID(string_class, "<init>", "([BLjava/lang/String;)V");
    if (init) result = static_cast<jstring>(jenv->NewObject(string_class, init, bytes, charset));
  }
  jenv->DeleteLocalRef(bytes);
  if (charset) jenv->DeleteLocalRef(charset);
  if (string_class) jenv->DeleteLocalRef(string_class);
  return result;
}

static jstring accswig_java_string(JNIEnv *jenv, const char *utf8) {
  return utf8 ? accswig_java_string(jenv, utf8, strlen(utf8)) : nullptr;
}

/* Throws the ai.accelerate exception of a status (the class names mirror acc_status). */
static void accswig_java_throw(JNIEnv *jenv, int code, const char *message);

/* The UTF-8 bytes of a Java string into `out`; false with an exception pending when it cannot be
 * passed (a NUL character would silently cut it short in the C API). */
static bool accswig_java_utf8(JNIEnv *jenv, jstring s, std::string &out) {
  /* A lone UTF-16 surrogate: String's encoder would put '?' in its place, so the library would see
   * another name than the caller's; refused instead. */
  const jsize length = jenv->GetStringLength(s);
  const jchar *chars = jenv->GetStringChars(s, nullptr);
  if (!chars) return false;
  jsize lone = -1;
  for (jsize i = 0; i < length && lone < 0; ++i) {
    const bool high = chars[i] >= 0xD800 && chars[i] <= 0xDBFF, low = chars[i] >= 0xDC00 && chars[i] <= 0xDFFF;
    if (high && i + 1 < length && chars[i + 1] >= 0xDC00 && chars[i + 1] <= 0xDFFF) ++i;
    else if (high || low) lone = i;
  }
  const unsigned unit = lone >= 0 ? chars[lone] : 0;
  jenv->ReleaseStringChars(s, chars);
  if (lone >= 0) {
    char message[128];
    snprintf(message, sizeof message, "a string holds a lone UTF-16 surrogate (U+%04X at index %d), which UTF-8 cannot carry",
             unit, (int)lone);
    accswig_java_throw(jenv, ACC_ERR_INVALID_ARGUMENT, message);
    return false;
  }
  jclass string_class = jenv->GetObjectClass(s);
  jmethodID get_bytes = jenv->GetMethodID(string_class, "getBytes", "(Ljava/lang/String;)[B");
  jstring charset = jenv->NewStringUTF("UTF-8");
  jbyteArray bytes = get_bytes && charset ? static_cast<jbyteArray>(jenv->CallObjectMethod(s, get_bytes, charset)) : nullptr;
  jenv->DeleteLocalRef(string_class);
  if (charset) jenv->DeleteLocalRef(charset);
  if (!bytes) return false;
  out.resize((size_t)jenv->GetArrayLength(bytes));
  jenv->GetByteArrayRegion(bytes, 0, (jsize)out.size(), reinterpret_cast<jbyte *>(&out[0]));
  jenv->DeleteLocalRef(bytes);
  if (out.find('\0') != std::string::npos) {
    accswig_java_throw(jenv, ACC_ERR_INVALID_ARGUMENT, "a string holds a NUL character (\\0), which the library cannot take");
    return false;
  }
  return true;
}

static void accswig_java_throw(JNIEnv *jenv, int code, const char *message) {
  const char *cls = "ai/accelerate/AccelerateException";
  switch (code) {
    case ACC_ERR_INVALID_ARGUMENT: cls = "ai/accelerate/InvalidArgumentException"; break;
    case ACC_ERR_INVALID_HANDLE: cls = "ai/accelerate/InvalidHandleException"; break;
    case ACC_ERR_NOT_INITIALIZED: cls = "ai/accelerate/NotInitializedException"; break;
    case ACC_ERR_UNSUPPORTED: cls = "ai/accelerate/UnsupportedException"; break;
    case ACC_ERR_OUT_OF_MEMORY: cls = "ai/accelerate/OutOfMemoryException"; break;
    case ACC_ERR_TIMEOUT: cls = "ai/accelerate/AccelerateTimeoutException"; break;
    case ACC_ERR_ABORTED: cls = "ai/accelerate/AbortedException"; break;
    case ACC_ERR_DISTRIBUTED: cls = "ai/accelerate/DistributedException"; break;
    case ACC_ERR_IO: cls = "ai/accelerate/AccelerateIOException"; break;
    case ACC_ERR_VERSION_MISMATCH: cls = "ai/accelerate/VersionMismatchException"; break;
    case ACC_ERR_INTERNAL: cls = "ai/accelerate/InternalException"; break;
    default: break;
  }
  jenv->ExceptionClear();
  jclass c = jenv->FindClass(cls);
  if (!c) return;  /* FindClass left a NoClassDefFoundError pending */
  jmethodID init = jenv->GetMethodID(c, "<init>", "(Ljava/lang/String;)V");
  jstring text = init ? accswig_java_string(jenv, message) : nullptr;
  jobject error = text ? jenv->NewObject(c, init, text) : nullptr;
  if (error) jenv->Throw(static_cast<jthrowable>(error));
  else if (!jenv->ExceptionCheck()) jenv->ThrowNew(c, "(the message could not be decoded)");
}
%}

/* A method of a closed proxy (its handle is 0) fails naming the object closed (see closed_receiver). */
%typemap(check, noblock=1) SWIGTYPE *self { accswig::note_receiver($1, "$*1_ltype"); }

/* ---- strings: UTF-8 both ways (see accswig_java_string) ---- */
%typemap(in, noblock=1) const char * (std::string temp) {
  $1 = nullptr;
  if ($input) {
    if (!accswig_java_utf8(jenv, $input, temp)) return $null;
    $1 = &temp[0];
  }
}
%typemap(freearg) const char * ""
%typemap(out, noblock=1) std::string {
  $result = accswig_java_string(jenv, $1.data(), $1.size());
}
%typemap(directorin, descriptor="Ljava/lang/String;", noblock=1) const char * {
  $input = 0;
  if ($1) {
    $input = accswig_java_string(jenv, $1);
    if (!$input) return $null;
  }
  Swig::LocalRefGuard $1_refguard(jenv, $input);
}

%exception {
  try {
    $action
    accswig::closed_receiver() = nullptr;
  } catch (const accswig::Error &e) {
    accswig_java_throw(jenv, e.code, accswig::error_message(e, "closed").c_str());
    return $null;
  } catch (const std::exception &e) {
    accswig::closed_receiver() = nullptr;
    accswig_java_throw(jenv, ACC_ERR_INTERNAL, e.what());
    return $null;
  }
}

/* The library is loaded, and its ABI checked, before any native method runs. */
%pragma(java) jniclasscode=%{
  static {
    NativeLoader.load();
  }
%}
%include "enums.swg"
%javaconst(1);
%javaconst(0) ACC_FORWARD_DEFAULT;
%javaconst(0) ACC_FORWARD_NO_GRAD;

/* Sizes and indices (size_t, a long here): a negative one is refused by its own value, instead of
 * reaching the library as a number near 2^64. */
%typemap(javain) size_t "Args.notNegative($javainput, \"$javainput\")"

/* ---- arrays: copied in and out (Get/Set<Type>ArrayRegion), nothing pinned across the call ---- */

%define ACC_JAVA_ARRAY(CTYPE, JTYPE, JNIELEM, JNIARRAY, NAME)
%typemap(jni) (const CTYPE *data, size_t n), (CTYPE *dst, size_t n) "JNIARRAY"
%typemap(jtype) (const CTYPE *data, size_t n), (CTYPE *dst, size_t n) "JTYPE[]"
%typemap(jstype) (const CTYPE *data, size_t n), (CTYPE *dst, size_t n) "JTYPE[]"
%typemap(javain) (const CTYPE *data, size_t n), (CTYPE *dst, size_t n) "$javainput"
%typemap(in) (const CTYPE *data, size_t n) (std::vector<CTYPE> temp) {
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "array is null");
    return $null;
  }
  temp.resize((size_t)jenv->GetArrayLength($input));
  jenv->Get##NAME##ArrayRegion($input, 0, (jsize)temp.size(), reinterpret_cast<JNIELEM *>(temp.data()));
  $1 = temp.data();
  $2 = temp.size();
}
/* An output array is only written: the temporary is allocated (not copied in, not zero-filled)
 * and copied back by the argout typemap. */
%typemap(in) (CTYPE *dst, size_t n) (std::unique_ptr<CTYPE[]> temp, size_t count) {
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "array is null");
    return $null;
  }
  count = (size_t)jenv->GetArrayLength($input);
  temp.reset(new CTYPE[count]);
  $1 = temp.get();
  $2 = count;
}
%typemap(argout) (CTYPE *dst, size_t n) {
  jenv->Set##NAME##ArrayRegion($input, 0, (jsize)count$argnum, reinterpret_cast<const JNIELEM *>(temp$argnum.get()));
}
%enddef

ACC_JAVA_ARRAY(float, float, jfloat, jfloatArray, Float)
ACC_JAVA_ARRAY(double, double, jdouble, jdoubleArray, Double)
ACC_JAVA_ARRAY(int64_t, long, jlong, jlongArray, Long)
ACC_JAVA_ARRAY(int32_t, int, jint, jintArray, Int)
ACC_JAVA_ARRAY(uint8_t, byte, jbyte, jbyteArray, Byte)
%apply (const uint8_t *data, size_t n) { (const uint8_t *names, size_t namesSize) }
%apply (const uint8_t *data, size_t n) { (const uint8_t *texts, size_t textsSize) }
%apply (const int64_t *data, size_t n) { (const int64_t *shape, size_t ndim) }
%apply (const int64_t *data, size_t n) { (const int64_t *sizes, size_t nsizes) }
/* A shape that is the only argument is varargs: Tensor.rand(2, 3). */
%apply (const int64_t *data, size_t n) { (const int64_t *dims, size_t ndim) }
%typemap(jstype) (const int64_t *dims, size_t ndim) "long..."

/* ---- handle proxies ----------------------------------------------------------------------------- */

%define ACC_JAVA_HANDLE(CTYPE, TRACKED)
%typemap(javainterfaces) CTYPE "AutoCloseable"
%typemap(javabody) CTYPE %{
  private transient volatile long swigCPtr;
  private transient java.lang.ref.Cleaner.Cleanable swigCleanable;
  // Who closes this object besides its caller: a tensor scope, a batch (for the tensors taken from
  // it) or a pass over a loader (for its current batch); null when only the caller does.
  private transient Owner swigOwner;
  // What this object closes with itself: a batch's tensors, a loader's current pass.
  transient Owner swigEntries;

  protected $javaclassname(long cPtr, boolean cMemoryOwn) {
    swigCPtr = cPtr;
    // The safety net frees a handle that was never closed; it holds the address, not the proxy.
    swigCleanable = cMemoryOwn && cPtr != 0 ? NativeCleaner.register(this, cPtr, $javaclassname::swigFree) : null;
    if (TRACKED && swigCleanable != null) swigMoveTo(Tensors.current());
  }

  private static void swigFree(long cPtr) {
    NativeJNI.delete_$javaclassname(cPtr);
  }

  // A closed object passed as an argument is named as closed (the library would call it NULL).
  protected static long getCPtr($javaclassname obj) {
    if (obj == null) return 0;
    long cPtr = obj.swigCPtr;
    if (cPtr == 0) throw new InvalidHandleException("a closed $javaclassname was passed");
    return cPtr;
  }

  // Hands the object to `owner` (null: to its caller alone).
  synchronized void swigMoveTo(Owner owner) {
    Owner old = swigOwner;
    swigOwner = owner;
    if (old != null) old.remove(this);
    if (owner != null) owner.add(this);
  }

  /** Releases the native object now. Closing again does nothing; any other use of a closed
   *  object throws InvalidHandleException. */
  @Override
  public void close() {
    delete();
  }

  /** Whether close() was called (or the object was never owned). Takes no lock: a loader's worker
   *  thread may ask while close() waits for it. */
  public boolean isClosed() {
    return swigCPtr == 0;
  }
%}
// The native object is freed outside the proxy's lock: freeing a loader waits for its worker threads,
// whose functions may use the proxy meanwhile.
%typemap(javadestruct, methodname="delete", methodmodifiers="public") CTYPE {
    Owner entries;
    java.lang.ref.Cleaner.Cleanable cleanable;
    synchronized (this) {
      entries = swigEntries;
      swigEntries = null;
      // Closed from here on (the safety net holds the address to free): what closes with it sees so,
      // and a loader's pass does not end an epoch that another thread may be iterating.
      swigCPtr = 0;
      cleanable = swigCleanable;
      swigCleanable = null;
    }
    try {
      if (entries != null) entries.closeAll();
    } finally {
      swigMoveTo(null);
      if (cleanable != null) cleanable.clean();  // runs swigFree at most once, whoever gets there first
    }
  }
%typemap(javafinalize) CTYPE ""
%enddef

ACC_JAVA_HANDLE(acc_tensor, true)
ACC_JAVA_HANDLE(acc_tensor_list, true)
ACC_JAVA_HANDLE(acc_string_list, false)
ACC_JAVA_HANDLE(acc_options, false)
ACC_JAVA_HANDLE(acc_model, false)
ACC_JAVA_HANDLE(acc_optimizer, false)
ACC_JAVA_HANDLE(acc_scheduler, false)
ACC_JAVA_HANDLE(acc_averaged_model, false)
ACC_JAVA_HANDLE(acc_dataset, false)
ACC_JAVA_HANDLE(acc_dataloader, false)
ACC_JAVA_HANDLE(acc_accelerator, false)
ACC_JAVA_HANDLE(acc_progress, false)
ACC_JAVA_HANDLE(accswig::LoadReport, false)


/* Directors: no finalizer either; the host layer hands them to the library, which frees them. */
%typemap(javafinalize) accswig::SampleSource, accswig::StreamSource, accswig::Collator, accswig::StateHandler,
    accswig::CheckpointHook, accswig::ModelsCheckpointHook, accswig::Tracker, accswig::LrLambda, accswig::GroupLrLambda, accswig::BatchSizeRun, accswig::TraceReady ""

/* Internal plumbing the idiomatic methods (java_code.i) are built on. */
%javamethodmodifiers acc_tensor::copyShape "protected";
%javamethodmodifiers accswig::Library::findBatchSizeWith "protected";
%javamethodmodifiers acc_optimizer::addParamGroup "protected";
%javamethodmodifiers acc_dataset::fromSampleSource "protected";
%javamethodmodifiers acc_dataset::fromStreamSource "protected";
%javamethodmodifiers acc_dataloader::setCollator "protected";
%javamethodmodifiers acc_dataloader::fromBatchArrays "protected";
%javamethodmodifiers acc_string_list::copyBytes "protected";
%javamethodmodifiers acc_model::forward_ "protected";
%javamethodmodifiers acc_model::forwardAdapters_ "protected";
%javamethodmodifiers acc_accelerator::gatherObject "protected";
%javamethodmodifiers acc_accelerator::broadcastObject "protected";
%javamethodmodifiers acc_accelerator::splitBetweenProcesses "protected";
%javamethodmodifiers acc_accelerator::accumulateBegin "protected";
%javamethodmodifiers acc_accelerator::accumulateEnd "protected";
%javamethodmodifiers acc_accelerator::noSyncBegin "protected";
%javamethodmodifiers acc_accelerator::noSyncEnd "protected";
%javamethodmodifiers acc_accelerator::profileBegin "protected";
%javamethodmodifiers acc_accelerator::profileStep "protected";
%javamethodmodifiers acc_accelerator::profileEnd "protected";
%javamethodmodifiers acc_accelerator::localSgdBegin "protected";
%javamethodmodifiers acc_accelerator::localSgdStep "protected";
%javamethodmodifiers acc_accelerator::localSgdEnd "protected";
%javamethodmodifiers acc_accelerator::joinUnevenInputsBegin "protected";
%javamethodmodifiers acc_accelerator::joinUnevenInputsEnd "protected";
%javamethodmodifiers acc_accelerator::mainProcessFirstBegin "protected";
%javamethodmodifiers acc_accelerator::mainProcessFirstEnd "protected";
%javamethodmodifiers acc_accelerator::localMainProcessFirstBegin "protected";
%javamethodmodifiers acc_accelerator::localMainProcessFirstEnd "protected";
%javamethodmodifiers acc_accelerator::autocastBegin "protected";
%javamethodmodifiers acc_accelerator::autocastEnd "protected";
%javamethodmodifiers acc_accelerator::registerForCheckpointing "protected";
%javamethodmodifiers acc_accelerator::registerSaveStatePreHook "protected";
%javamethodmodifiers acc_accelerator::registerLoadStatePreHook "protected";
%javamethodmodifiers acc_accelerator::registerSaveStateModelsPreHook "protected";
%javamethodmodifiers acc_accelerator::registerLoadStateModelsPreHook "protected";
%javamethodmodifiers acc_accelerator::removeStatePreHook "protected";
%javamethodmodifiers acc_accelerator::onTraceReady "protected";
%javamethodmodifiers acc_accelerator::addTracker "protected";
%javamethodmodifiers acc_accelerator::logValues "protected";
%javamethodmodifiers acc_accelerator::logTexts "protected";
%javamethodmodifiers acc_accelerator::logGroup "protected";
%javamethodmodifiers acc_accelerator::logImages "protected";
%javamethodmodifiers acc_accelerator::backwardWith "protected";
%javamethodmodifiers acc_accelerator::initTrackersWith "protected";
%javamethodmodifiers acc_accelerator::logHistogramWith "protected";
%javamethodmodifiers acc_scheduler::fromLrLambda "protected";
%javamethodmodifiers acc_scheduler::fromLrMultiplicative "protected";
%javamethodmodifiers acc_scheduler::fromGroupLrLambda "protected";
%javamethodmodifiers acc_scheduler::fromGroupLrMultiplicative "protected";
%javamethodmodifiers acc_scheduler::fromCyclicScale "protected";
/* A batch's get/find hand their tensors to the batch (TensorList.get in java_code.i). */
%rename(getEntry) acc_tensor_list::get_;
%rename(iter) acc_dataloader::iter_;
%rename(findEntry) acc_tensor_list::find_;
%javamethodmodifiers acc_tensor_list::get_ "protected";
%javamethodmodifiers acc_tensor_list::find_ "protected";

%include "swig/java_code.i"
