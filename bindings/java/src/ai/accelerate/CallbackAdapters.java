package ai.accelerate;

import java.util.ArrayList;
import java.util.List;

/** Directors that run the user's lambdas. Nothing thrown may unwind into C++: every Throwable is
 *  reported through acc_callback_set_error and a non-zero status. Ownership of each director goes
 *  to the library (a strong JNI reference), which releases it with the dataset or loader. A null
 *  function is refused here, when the object is made (NullPointerException naming it), not at its
 *  first call. */
final class CallbackAdapters {
  private CallbackAdapters() {}

  static SampleSource sample(SampleFunction fn) {
    java.util.Objects.requireNonNull(fn, "the function is null");
    SampleSource s = new SampleSource() {
      @Override
      public int sample(long index, TensorList out) {
        return guarded(() -> appendAndClose(out, fn.apply(index), "sample " + index));
      }
    };
    s.swigReleaseOwnership();
    return s;
  }

  static StreamSource stream(StreamFunction fn) {
    java.util.Objects.requireNonNull(fn, "the function is null");
    StreamSource s = new StreamSource() {
      @Override
      public int start(long epoch) {
        return guarded(() -> fn.start(epoch));
      }

      @Override
      public int next(TensorList out) {
        return guarded(() -> {
          Tensor[] fields = fn.next();
          if (fields != null) appendAndClose(out, fields, "next");
        });
      }
    };
    s.swigReleaseOwnership();
    return s;
  }

  static Collator collate(CollateFunction fn) {
    java.util.Objects.requireNonNull(fn, "the function is null");
    Collator c = new Collator() {
      @Override
      public int collate(Samples samples, TensorList out) {
        List<Tensor[]> list = new ArrayList<>();
        try {
          for (long i = 0, n = samples.size(); i < n; ++i) {
            Tensor[] sample = new Tensor[(int) samples.fields(i)];
            list.add(sample);
            for (int j = 0; j < sample.length; ++j) sample[j] = samples.get(i, j);
          }
          appendAndClose(out, fn.apply(list), "collate");
          return 0;
        } catch (Throwable t) {
          return failed(t);
        } finally {
          for (Tensor[] sample : list)
            for (Tensor t : sample)
              if (t != null) t.close();
        }
      }
    };
    c.swigReleaseOwnership();
    return c;
  }

  static StateHandler state(CheckpointState st) {
    java.util.Objects.requireNonNull(st, "the state is null");
    StateHandler h = new StateHandler() {
      @Override
      public int save(Bytes out) {
        return guarded(() -> {
          byte[] data = st.save();
          out.append(data == null ? new byte[0] : data);
        });
      }

      @Override
      public int load(Bytes in) {
        return guarded(() -> {
          byte[] data = new byte[Math.toIntExact(in.size())];
          in.copyTo(data);
          st.load(data);
        });
      }
    };
    h.swigReleaseOwnership();
    return h;
  }

  static CheckpointHook hook(CheckpointHookFunction fn) {
    java.util.Objects.requireNonNull(fn, "the function is null");
    CheckpointHook h = new CheckpointHook() {
      @Override
      public int run(String dir) {
        return guarded(() -> fn.run(dir));
      }
    };
    h.swigReleaseOwnership();
    return h;
  }

  static ModelsCheckpointHook modelsHook(CheckpointModelsHookFunction fn) {
    java.util.Objects.requireNonNull(fn, "the function is null");
    ModelsCheckpointHook h = new ModelsCheckpointHook() {
      @Override
      public int run(CheckpointModelsView view, String dir) {
        CheckpointModels models = new CheckpointModels(view);
        try {
          return guarded(() -> fn.run(models, dir));
        } finally {
          models.end();
        }
      }
    };
    h.swigReleaseOwnership();
    return h;
  }

  static Tracker tracker(TrackerCallbacks cb) {
    java.util.Objects.requireNonNull(cb, "the tracker is null");
    Tracker tr = new Tracker() {
      @Override
      public int init(String project, String configJson) {
        return guarded(() -> cb.init(project, configJson));
      }

      @Override
      public int log(Metrics metrics, long step) {
        return guarded(() -> {
          java.util.Map<String, Double> values = new java.util.LinkedHashMap<>();
          for (long i = 0, n = metrics.size(); i < n; ++i) values.put(metrics.name(i), metrics.value(i));
          cb.log(values, step);
        });
      }

      @Override
      public int logText(Texts texts, long step) {
        return guarded(() -> {
          java.util.Map<String, String> values = new java.util.LinkedHashMap<>();
          for (long i = 0, n = texts.size(); i < n; ++i) values.put(texts.name(i), texts.text(i));
          cb.logText(values, step);
        });
      }

      @Override
      public boolean takesImages() {
        return overrides(cb, "logImages", java.util.Map.class, long.class);
      }

      @Override
      public int logImages(Images images, long step) {
        return guarded(() -> {
          java.util.Map<String, byte[]> pngs = new java.util.LinkedHashMap<>();
          for (long i = 0, n = images.size(); i < n; ++i) {
            byte[] png = new byte[Math.toIntExact(images.pngSize(i))];
            images.copyPng(i, png);
            pngs.put(images.name(i), png);
          }
          cb.logImages(pngs, step);
        });
      }

      @Override
      public boolean takesHistograms() {
        return overrides(cb, "logHistogram", String.class, Histogram.class, long.class);
      }

      @Override
      public int logHistogram(HistogramView histogram, long step) {
        return guarded(() -> cb.logHistogram(histogram.name(), new Histogram(histogram), step));
      }

      @Override
      public int finish() {
        return guarded(() -> cb.finish());
      }
    };
    tr.swigReleaseOwnership();
    return tr;
  }

  // Whether the tracker's class has its own `method` (the interface's defaults leave images and
  // histograms, which are then not made for it).
  static boolean overrides(TrackerCallbacks cb, String method, Class<?>... parameters) {
    try {
      return cb.getClass().getMethod(method, parameters).getDeclaringClass() != TrackerCallbacks.class;
    } catch (NoSuchMethodException e) {
      return false;
    }
  }

  static TraceReady traceReady(TraceReadyFunction fn) {
    java.util.Objects.requireNonNull(fn, "the function is null");
    TraceReady t = new TraceReady() {
      @Override
      public int ready(long step) {
        return guarded(() -> fn.ready(step));
      }
    };
    t.swigReleaseOwnership();
    return t;
  }

  static LrLambda lrLambda(LrLambdaFunction fn) {
    java.util.Objects.requireNonNull(fn, "the function is null");
    LrLambda l = new LrLambda() {
      @Override
      public int factor(long step, LrFactor out) {
        return guarded(() -> out.set(fn.factor(step)));
      }
    };
    l.swigReleaseOwnership();
    return l;
  }

  static GroupLrLambda groupLrLambda(java.util.List<? extends LrLambdaFunction> fns) {
    final java.util.List<LrLambdaFunction> each = new java.util.ArrayList<>(java.util.Objects.requireNonNull(fns, "the functions are null"));
    for (int g = 0; g < each.size(); ++g) java.util.Objects.requireNonNull(each.get(g), "the function of group " + g + " is null");
    GroupLrLambda l = new GroupLrLambda() {
      @Override
      public int factor(long group, long step, LrFactor out) {
        return guarded(() -> out.set(each.get((int) group).factor(step)));
      }
    };
    l.swigReleaseOwnership();
    return l;
  }

  /** Borrowed for one search (the caller deletes it): returns the library's status of what failed. */
  static BatchSizeRun batchSizeRun(BatchSizeFunction fn) {
    return new BatchSizeRun() {
      @Override
      public int run(long batchSize) {
        try {
          fn.run(batchSize);
          return 0;
        } catch (AccelerateException e) {
          report(e.getMessage());
          return e.status().swigValue();
        } catch (Throwable t) {
          failed(t);
          return Status.IO.swigValue();
        }
      }
    };
  }

  private static void appendAndClose(TensorList out, Tensor[] fields, String what) {
    if (fields == null) throw new NullPointerException("the callback returned null for " + what);
    try {
      for (Tensor t : fields) out.append("", t);
    } finally {
      for (Tensor t : fields)
        if (t != null) t.close();
    }
  }

  /** The body of a callback: returns while anything it throws is not allowed to reach C++. */
  @FunctionalInterface
  private interface Body {
    void run() throws Throwable;
  }

  /** Runs a callback's body: 0, or the status of a failure reported with acc_callback_set_error. */
  private static int guarded(Body body) {
    try {
      body.run();
      return 0;
    } catch (Throwable t) {
      return failed(t);
    }
  }

  private static int failed(Throwable t) {
    String message;
    try {
      message = t.getMessage() == null ? t.toString() : t.getClass().getSimpleName() + ": " + t.getMessage();
    } catch (Throwable unreadable) {  // a getMessage that throws must not leave the callback
      message = t.getClass().getSimpleName() + " (its message could not be read)";
    }
    report(message);
    return 1;
  }

  /**
   * Hands a callback's failure to the library. What the library's strings cannot hold (a NUL, a lone
   * surrogate) is written out, so the user's message is not replaced by the binding's refusal.
   */
  private static void report(String message) {
    Accelerate.callbackSetError(Args.writtenOut(String.valueOf(message)));
  }
}
