/* char_lm.c — a small GPT trained as a character-level language model, through the C API only.
 *
 *   char_lm [--text FILE] [--epochs N] [--batch-size N] [--lr X] [--context N] [--max-perplexity X]
 *           [--project-dir DIR] [--init-from DIR [--lora TARGETS]]
 *
 * Reads a text file (default: the GPL-3 text Debian ships in /usr/share/common-licenses), cuts it
 * into windows of --context characters (targets: the same window shifted by one), keeps the last
 * tenth for validation, and trains a decoder-only transformer built from a layer spec: token and
 * learned position embeddings, 2 causal pre-norm blocks, RMSNorm and an output head tied to the token
 * embedding. Prints the training loss and the validation perplexity after each epoch on the main
 * process, logs both to JSONL under --project-dir, and saves there at the end the whole state
 * (final_state, save_state) and the model with its vocabulary (model: model.safetensors as
 * save_model writes it, vocab.txt). Runs on several processes with accelerate-launch like any
 * program. Exits 3 when the final validation perplexity is above --max-perplexity (or, fine-tuning,
 * not below where it started).
 *
 * Fine-tuning: --init-from DIR starts from such a saved model (its weights and vocabulary) instead of
 * random weights; --lora TARGETS then trains LoRA adapters on the named linear layers alone (e.g.
 * "out_proj,linear1,linear2"; rank 8, alpha 16), saved in PEFT's layout to --project-dir/adapter,
 * while model/ gets the merged weights. */
#define _DEFAULT_SOURCE /* realpath */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelerate.h"

#define CHECK(expr)                                                                              \
  do {                                                                                           \
    acc_status status_ = (expr);                                                                 \
    if (status_ != ACC_OK) {                                                                     \
      fprintf(stderr, "error: %s: %s\n  at %s:%d: %s\n", acc_status_name(status_),               \
              acc_last_error_message(), __FILE__, __LINE__, #expr);                              \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

struct args {
  const char *text, *project_dir, *init_from, *lora;
  int epochs, batch_size, context;
  double lr, max_perplexity;
};

/* A command-line value that must be a whole number / a number: anything else is a usage error. */
static long whole_number(const char *flag, const char *v) {
  char *end = NULL;
  long n;
  errno = 0;
  n = strtol(v, &end, 10);
  if (!*v || *end || errno) { fprintf(stderr, "%s takes a whole number, got '%s'\n", flag, v); exit(2); }
  return n;
}
static double number(const char *flag, const char *v) {
  char *end = NULL;
  double x;
  errno = 0;
  x = strtod(v, &end);
  if (!*v || *end || errno || !isfinite(x)) { fprintf(stderr, "%s takes a finite number, got '%s'\n", flag, v); exit(2); }
  return x;
}

/* Whether two paths name the same existing folder. */
static int realpath_same(const char *a, const char *b) {
  char ra[PATH_MAX], rb[PATH_MAX];
  return realpath(a, ra) && realpath(b, rb) && !strcmp(ra, rb);
}

static const char kUsage[] =
    "usage: char_lm [--text FILE] [--epochs N] [--batch-size N] [--lr X] [--context N] [--max-perplexity X]\n"
    "               [--project-dir DIR] [--init-from DIR [--lora TARGETS]]\n";

/* A usage error: what is wrong, then the usage. */
static void usage_error(const char *what, const char *detail) {
  fprintf(stderr, "char_lm: %s%s\n%s", what, detail, kUsage);
  exit(2);
}

/* A whole number in [least, INT_MAX] for `flag`, else a usage error. */
static int count_at_least(const char *flag, const char *v, long least) {
  const long n = whole_number(flag, v);
  char limits[96];
  snprintf(limits, sizeof limits, " must be from %ld to %d, got %ld", least, INT_MAX, n);
  if (n < least || n > INT_MAX) usage_error(flag, limits);
  return (int)n;
}

static struct args parse_args(int argc, char **argv) {
  struct args a = {"/usr/share/common-licenses/GPL-3", "char_lm_project", NULL, NULL, 8, 8, 64, 3e-3, 0.0};
  int i;
  for (i = 1; i < argc; i += 2) {
    const char *v = argv[i + 1];
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { fputs(kUsage, stdout); exit(0); }
    if (!v) usage_error(argv[i], strncmp(argv[i], "--", 2) ? ": unexpected argument" : " needs a value");
    if (!strcmp(argv[i], "--text")) a.text = v;
    else if (!strcmp(argv[i], "--project-dir")) a.project_dir = v;
    else if (!strcmp(argv[i], "--init-from")) a.init_from = v;
    else if (!strcmp(argv[i], "--lora")) a.lora = v;
    else if (!strcmp(argv[i], "--epochs")) a.epochs = count_at_least(argv[i], v, 1);
    else if (!strcmp(argv[i], "--batch-size")) a.batch_size = count_at_least(argv[i], v, 1);
    else if (!strcmp(argv[i], "--context")) a.context = count_at_least(argv[i], v, 2); /* an input and a target */
    else if (!strcmp(argv[i], "--lr")) a.lr = number(argv[i], v);
    else if (!strcmp(argv[i], "--max-perplexity")) a.max_perplexity = number(argv[i], v);
    else usage_error("unknown option ", argv[i]);
  }
  if (!*a.project_dir) usage_error("--project-dir", " must name a folder (the run writes its logs and model there)");
  if (a.lora && !a.init_from) usage_error("--lora", " adapts a model: it needs --init-from");
  if (a.init_from) { /* the run saves PROJECT/model: never over the model it starts from */
    char saved[4096];
    snprintf(saved, sizeof saved, "%s/model", a.project_dir);
    if (!strcmp(saved, a.init_from) || realpath_same(saved, a.init_from)) {
      fprintf(stderr, "--init-from %s is the model this run would save: choose another --project-dir\n", a.init_from);
      exit(2);
    }
  }
  return a;
}

static unsigned char *read_text(const char *path, long *size) {
  FILE *f = fopen(path, "rb");
  unsigned char *text;
  if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(1); }
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  text = malloc((size_t)*size);
  if (!text || fread(text, 1, (size_t)*size, f) != (size_t)*size) { fprintf(stderr, "cannot read %s\n", path); exit(1); }
  fclose(f);
  return text;
}

/* Windows [first, last) of the encoded text: inputs and their targets (shifted by one), as a data set. */
static acc_dataset *windows(const int64_t *ids, long first, long last, int context) {
  const long count = (last - first) / context;
  int64_t *x = malloc(sizeof(int64_t) * (size_t)(count * context));
  int64_t *y = malloc(sizeof(int64_t) * (size_t)(count * context));
  const int64_t dims[] = {count, context};
  acc_tensor *fields[2] = {NULL, NULL};
  acc_dataset *ds = NULL;
  long w, t;
  for (w = 0; w < count; ++w)
    for (t = 0; t < context; ++t) {
      x[w * context + t] = ids[first + w * context + t];
      y[w * context + t] = ids[first + w * context + t + 1];
    }
  CHECK(acc_tensor_from_host(x, sizeof(int64_t) * (size_t)(count * context), dims, 2, ACC_DTYPE_INT64, &fields[0]));
  CHECK(acc_tensor_from_host(y, sizeof(int64_t) * (size_t)(count * context), dims, 2, ACC_DTYPE_INT64, &fields[1]));
  CHECK(acc_dataset_from_tensors((const acc_tensor *const *)fields, 2, &ds));
  acc_tensor_free(fields[0]);
  acc_tensor_free(fields[1]);
  free(x);
  free(y);
  return ds;
}

/* Mean next-character cross-entropy of one batch: logits [B, T, V] against targets [B, T]. */
static acc_tensor *batch_loss(acc_model *model, acc_tensor_list *batch, int64_t vocab, uint32_t flags) {
  acc_tensor *x = NULL, *y = NULL, *logits = NULL, *flat_logits = NULL, *flat_y = NULL, *loss = NULL;
  const int64_t logit_dims[] = {-1, vocab}, target_dims[] = {-1};
  CHECK(acc_tensor_list_get(batch, 0, &x));
  CHECK(acc_tensor_list_get(batch, 1, &y));
  CHECK(acc_model_forward1(model, x, flags, &logits));
  CHECK(acc_tensor_reshape(logits, logit_dims, 2, &flat_logits));
  CHECK(acc_tensor_reshape(y, target_dims, 1, &flat_y));
  CHECK(acc_loss_cross_entropy(flat_logits, flat_y, ACC_REDUCTION_MEAN, 0.0, &loss));
  acc_tensor_free(x); acc_tensor_free(y); acc_tensor_free(logits); acc_tensor_free(flat_logits); acc_tensor_free(flat_y);
  return loss;
}

/* Validation perplexity: exp of the mean loss over every process's batches. */
static double perplexity(acc_accelerator *acc, acc_model *model, acc_dataloader *loader, int64_t vocab) {
  double sums[2] = {0.0, 0.0}; /* loss sum, batches */
  const int64_t dims[] = {2};
  acc_tensor *local = NULL, *total = NULL;
  acc_tensor_list *batch = NULL;
  CHECK(acc_model_set_training(model, 0));
  for (;;) {
    acc_tensor *loss = NULL;
    double value = 0.0;
    CHECK(acc_dataloader_next(loader, &batch));
    if (!batch) break;
    loss = batch_loss(model, batch, vocab, ACC_FORWARD_NO_GRAD);
    CHECK(acc_tensor_item(loss, &value));
    sums[0] += value;
    sums[1] += 1.0;
    acc_tensor_free(loss);
    acc_tensor_list_free(batch);
  }
  CHECK(acc_model_set_training(model, 1));
  CHECK(acc_tensor_from_host(sums, sizeof sums, dims, 1, ACC_DTYPE_FLOAT64, &local));
  CHECK(acc_reduce(acc, local, ACC_REDUCTION_SUM, "validation loss", &total));
  CHECK(acc_tensor_to_host(total, sums, sizeof sums));
  acc_tensor_free(local);
  acc_tensor_free(total);
  return sums[1] > 0 ? exp(sums[0] / sums[1]) : INFINITY;
}

int main(int argc, char **argv) {
  struct args a = parse_args(argc, argv);
  long size = 0, i, split;
  unsigned char *text = read_text(a.text, &size);
  int64_t *ids = malloc(sizeof(int64_t) * (size_t)size), vocab = 0, code[256];
  char spec[2048], line[256];
  acc_options *acc_opts = NULL, *loader_opts = NULL, *opt_opts = NULL;
  acc_accelerator *acc = NULL;
  acc_dataset *train = NULL, *valid = NULL;
  acc_dataloader *train_loader = NULL, *valid_loader = NULL;
  acc_model *model = NULL;
  acc_optimizer *opt = NULL;
  char *saved = NULL;
  double ppl = INFINITY, ppl_before = INFINITY;
  int64_t step = 0;
  int epoch, main_process = 0;

  /* The vocabulary: the bytes the text uses, numbered in byte order; when fine-tuning, the base
   * model's (its vocab.txt holds them in order). */
  for (i = 0; i < 256; ++i) code[i] = -1;
  if (a.init_from) {
    char path[1024];
    long n = 0;
    unsigned char *bytes;
    snprintf(path, sizeof path, "%s/vocab.txt", a.init_from);
    bytes = read_text(path, &n);
    for (i = 0; i < n; ++i) code[bytes[i]] = vocab++;
    free(bytes);
  } else {
    for (i = 0; i < size; ++i) code[text[i]] = 0;
    for (i = 0; i < 256; ++i)
      if (code[i] == 0) code[i] = vocab++;
  }
  for (i = 0; i < size; ++i) {
    if (code[text[i]] < 0) { fprintf(stderr, "byte %d of %s is not in the base model's vocabulary\n", text[i], a.text); return 1; }
    ids[i] = code[text[i]];
  }
  split = size - size / 10;
  if (split / a.context < 1 || (size - split - 1) / a.context < 1) { fprintf(stderr, "the text is too short\n"); return 1; }

  CHECK(acc_options_create(ACC_OPTIONS_ACCELERATOR, &acc_opts));
  CHECK(acc_options_set_int(acc_opts, "seed", 7));
  CHECK(acc_options_set(acc_opts, "log_with", "jsonl"));
  CHECK(acc_options_set(acc_opts, "project_dir", a.project_dir));
  CHECK(acc_accelerator_create(acc_opts, &acc));

  train = windows(ids, 0, split - 1, a.context);
  valid = windows(ids, split, size - 1, a.context);
  CHECK(acc_options_create(ACC_OPTIONS_DATALOADER, &loader_opts));
  CHECK(acc_options_set_int(loader_opts, "batch_size", a.batch_size));
  CHECK(acc_options_set_bool(loader_opts, "shuffle", 1));
  CHECK(acc_dataloader_create(train, loader_opts, &train_loader));
  CHECK(acc_options_set_bool(loader_opts, "shuffle", 0));
  CHECK(acc_dataloader_create(valid, loader_opts, &valid_loader));

  /* A GPT from a layer spec: ids [B, T] in, logits [B, T, V] out; the head reuses layer 0's weight. */
  snprintf(spec, sizeof spec,
           "[{\"type\":\"embedding\",\"num_embeddings\":%lld,\"embedding_dim\":64},"
           " {\"type\":\"positional_embedding\",\"num_embeddings\":%d,\"embedding_dim\":64},"
           " {\"type\":\"transformer_encoder_layer\",\"d_model\":64,\"nhead\":4,\"dim_feedforward\":256,"
           "  \"dropout\":0.1,\"batch_first\":true,\"norm_first\":true,\"causal\":true},"
           " {\"type\":\"transformer_encoder_layer\",\"d_model\":64,\"nhead\":4,\"dim_feedforward\":256,"
           "  \"dropout\":0.1,\"batch_first\":true,\"norm_first\":true,\"causal\":true},"
           " {\"type\":\"rmsnorm\",\"normalized_shape\":64},"
           " {\"type\":\"tied_linear\",\"tie_to\":0}]",
           (long long)vocab, a.context);
  CHECK(acc_model_from_spec(spec, &model));
  if (a.init_from) {
    /* Fine-tuning: the base weights (strict: every name and shape must match the spec), then
     * adapters on the chosen layers; adding them freezes everything else. */
    CHECK(acc_model_load_safetensors(model, a.init_from, 1, NULL, NULL));
    if (a.lora) {
      acc_options *lora_opts = NULL;
      size_t adapted = 0;
      CHECK(acc_options_create(ACC_OPTIONS_LORA, &lora_opts));
      CHECK(acc_options_set_int(lora_opts, "r", 8));
      CHECK(acc_options_set_double(lora_opts, "lora_alpha", 16.0));
      CHECK(acc_model_add_lora(model, a.lora, lora_opts, &adapted));
      acc_options_free(lora_opts);
    }
  }
  CHECK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &opt_opts));
  CHECK(acc_options_set_double(opt_opts, "lr", a.lr));
  CHECK(acc_optimizer_create(model, "adamw", opt_opts, &opt));
  /* The usual fine-tuning convention in one line: no weight decay for biases and norm weights
   * (adapters have neither). */
  if (!a.lora) {
    acc_options *no_decay = NULL;
    size_t moved = 0;
    CHECK(acc_options_create(ACC_OPTIONS_OPTIMIZER, &no_decay));
    CHECK(acc_options_set_double(no_decay, "weight_decay", 0.0));
    CHECK(acc_optimizer_add_param_group_matching(opt, "*.bias,*norm*.weight", no_decay, &moved));
    acc_options_free(no_decay);
  }
  CHECK(acc_prepare(acc, &model, &opt, &train_loader, NULL));
  CHECK(acc_prepare(acc, NULL, NULL, &valid_loader, NULL));
  snprintf(line, sizeof line, "%ld characters, a vocabulary of %lld; windows of %d; guessing has perplexity %lld",
           size, (long long)vocab, a.context, (long long)vocab);
  CHECK(acc_print(acc, line));
  snprintf(line, sizeof line, "{\"vocab\": %lld, \"context\": %d, \"lr\": %g}", (long long)vocab, a.context, a.lr);
  CHECK(acc_init_trackers(acc, "char_lm", line));
  if (a.init_from) {
    ppl_before = perplexity(acc, model, valid_loader, vocab);
    snprintf(line, sizeof line, "fine-tuning %s: validation perplexity %.2f before", a.init_from, ppl_before);
    CHECK(acc_print(acc, line));
  }

  for (epoch = 0; epoch < a.epochs; ++epoch) {
    double loss_sum = 0.0;
    int64_t batches = 0;
    acc_tensor_list *batch = NULL;
    for (;;) {
      acc_tensor *loss = NULL;
      double value = 0.0;
      CHECK(acc_dataloader_next(train_loader, &batch));
      if (!batch) break;
      loss = batch_loss(model, batch, vocab, ACC_FORWARD_DEFAULT);
      CHECK(acc_backward(acc, loss));
      CHECK(acc_clip_grad_norm(acc, model, 1.0, 2.0, NULL));
      CHECK(acc_optimizer_step(opt));
      CHECK(acc_optimizer_zero_grad(opt));
      CHECK(acc_tensor_item(loss, &value));
      loss_sum += value;
      ++batches;
      ++step;
      acc_tensor_free(loss);
      acc_tensor_list_free(batch);
    }
    ppl = perplexity(acc, model, valid_loader, vocab);
    snprintf(line, sizeof line, "epoch %d/%d: training loss %.3f, validation perplexity %.2f", epoch + 1, a.epochs,
             batches ? loss_sum / (double)batches : 0.0, ppl);
    CHECK(acc_print(acc, line));
    {
      const char *names[] = {"train_loss", "valid_perplexity"};
      const double values[] = {batches ? loss_sum / (double)batches : 0.0, ppl};
      CHECK(acc_log(acc, names, values, 2, step));
    }
  }
  {
    char checkpoint[1024];
    snprintf(checkpoint, sizeof checkpoint, "%s/final_state", a.project_dir);
    CHECK(acc_save_state(acc, checkpoint, &saved));
    snprintf(line, sizeof line, "state saved to %s", saved);
    CHECK(acc_print(acc, line));
    /* The model (adapters merged in) and its vocabulary, the starting point of a fine-tuning run. */
    snprintf(checkpoint, sizeof checkpoint, "%s/model", a.project_dir);
    CHECK(acc_save_model(acc, model, checkpoint, NULL));
    CHECK(acc_accelerator_is_main_process(acc, &main_process));
    if (main_process) {
      char path[1100];
      FILE *f;
      snprintf(path, sizeof path, "%s/vocab.txt", checkpoint);
      f = fopen(path, "wb");
      for (i = 0; f && i < 256; ++i)
        if (code[i] >= 0) fputc((int)i, f);
      if (!f || fclose(f) != 0) { fprintf(stderr, "cannot write %s\n", path); return 1; }
      if (a.lora) {
        snprintf(checkpoint, sizeof checkpoint, "%s/adapter", a.project_dir);
        CHECK(acc_model_save_lora(model, checkpoint));
      }
    }
  }
  CHECK(acc_end_training(acc));

  acc_string_free(saved);
  acc_optimizer_free(opt);
  acc_model_free(model);
  acc_dataloader_free(train_loader);
  acc_dataloader_free(valid_loader);
  acc_dataset_free(train);
  acc_dataset_free(valid);
  acc_options_free(acc_opts);
  acc_options_free(loader_opts);
  acc_options_free(opt_opts);
  acc_accelerator_free(acc);
  free(ids);
  free(text);
  return (a.max_perplexity > 0 && !(ppl <= a.max_perplexity)) || !(ppl < ppl_before) ? 3 : 0;
}
