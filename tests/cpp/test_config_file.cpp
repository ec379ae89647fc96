// Accelerate's config file: reading files Python's `accelerate config` writes, writing them back,
// where they are found, precedence (launcher and Accelerator), errors; the questionnaire and
// estimate-memory. Every test points HF_HOME at its own temporary folder: the user's real config
// is never read or written.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "accelerator/config.h"
#include "cli/estimate_memory.h"
#include "cli/questionnaire.h"
#include "common/error.h"
#include "common/yaml_json.h"
#include "config/config_file.h"
#include "launch/launch_flags.h"

namespace fs = std::filesystem;

namespace {

const fs::path kFixtures = fs::path(__FILE__).parent_path().parent_path() / "data" / "config";

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const acc::Error& e) {
    return e.what();
  }
  return "no error";
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

// A private HF_HOME (and no other variable that finds or overrides a config) for each test.
class Config : public testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/acc_config_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    for (const char* name : kVariables) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
    setenv("HF_HOME", (dir_ / "hf").c_str(), 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
    fs::remove_all(dir_);
  }
  fs::path default_file() const { return dir_ / "hf" / "accelerate" / "default_config.yaml"; }

  static constexpr const char* kVariables[] = {"HF_HOME",
                                               "XDG_CACHE_HOME",
                                               "HOME",
                                               "ACCELERATE_CONFIG_FILE",
                                               "ACCELERATE_USE_CPU",
                                               "ACCELERATE_MIXED_PRECISION",
                                               "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
                                               "ACCELERATE_CONFIG_REPORTED",
                                               "RANK",
                                               "WORLD_SIZE",
                                               "TORCHELASTIC_RUN_ID",
                                               "ACCELERATE_NO_CONFIG_FILE"};
  fs::path dir_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_F(Config, ReadsAFileWrittenByAccelerate) {
  const auto c = acc::load_config_file(kFixtures / "multi_gpu_two_machines.yaml");
  EXPECT_EQ(c.compute_environment, "LOCAL_MACHINE");
  EXPECT_EQ(c.distributed_type, "MULTI_GPU");
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_FALSE(c.use_cpu);
  EXPECT_TRUE(c.debug);
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_EQ(c.num_machines, 2);
  EXPECT_EQ(c.machine_rank, 1);
  EXPECT_EQ(c.gpu_ids, "0,1");
  EXPECT_EQ(c.main_process_ip, "10.1.2.3");
  EXPECT_EQ(c.main_process_port, 29501);
  EXPECT_EQ(c.rdzv_backend, "static");
  EXPECT_TRUE(c.same_network);
  EXPECT_EQ(c.main_training_function, "main");
  EXPECT_FALSE(c.enable_cpu_affinity);
  EXPECT_FALSE(c.gradient_accumulation_steps);
  // TPU keys with nothing asked are quiet; torch.compile is asked for and cannot be had here.
  EXPECT_EQ(c.other.count("downcast_bf16"), 1u);
  EXPECT_EQ(c.other.count("tpu_env"), 1u);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("dynamo_config is ignored"), std::string::npos) << c.warnings[0];
}

TEST_F(Config, ReadsEveryKeyAndWarnsAboutWhatItIgnores) {
  const auto c = acc::load_config_file(kFixtures / "every_key.yaml");
  EXPECT_EQ(c.distributed_type, "MULTI_CPU");
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_TRUE(c.use_cpu);
  EXPECT_EQ(c.num_processes, 3);
  EXPECT_EQ(c.gpu_ids, "all");
  EXPECT_EQ(c.main_process_ip, "192.168.0.7");
  EXPECT_EQ(c.main_process_port, 29600);
  EXPECT_EQ(c.main_training_function, "train");
  EXPECT_EQ(c.gradient_accumulation_steps, 4);
  EXPECT_TRUE(c.enable_cpu_affinity);
  EXPECT_EQ(c.rdzv_backend, "c10d");
  // Each thing asked for that this runtime does not do is named once; the rest is quiet.
  EXPECT_EQ(c.warnings.size(), 5u);
  for (const char* key : {"fsdp_config", "rdzv_backend c10d", "tpu_env", "tpu_name", "my_own_key"})
    EXPECT_TRUE(mentions(c.warnings, key)) << key;
  for (const char* key : {"enable_cpu_affinity", "deepspeed_config", "dynamo_config", "tpu_use_cluster", "downcast_bf16",
                          "command_file"})
    EXPECT_FALSE(mentions(c.warnings, key)) << key;
  EXPECT_EQ(c.other.count("my_own_key"), 1u);  // kept, so that writing the file back loses nothing
}

TEST_F(Config, WritesWhatAccelerateWrites) {
  // A file from Python's `accelerate config`, read and written back, is the same file byte for byte.
  for (const char* name : {"multi_gpu_two_machines.yaml", "multi_cpu_2.yaml"}) {
    const auto path = dir_ / name;
    acc::save_config_file(acc::load_config_file(kFixtures / name), path);
    EXPECT_EQ(read(path), read(kFixtures / name)) << name;
  }
}

TEST_F(Config, RoundTripKeepsEveryValue) {
  const auto original = acc::load_config_file(kFixtures / "every_key.yaml");
  for (const char* name : {"copy.yaml", "copy.json"}) {
    const auto path = dir_ / "sub" / name;  // the folder is created
    acc::save_config_file(original, path);
    const auto back = acc::load_config_file(path);
    EXPECT_EQ(acc::config_to_yaml(back), acc::config_to_yaml(original)) << name;
    EXPECT_EQ(back.warnings, original.warnings) << name;
  }
  EXPECT_EQ(read(dir_ / "sub" / "copy.json").substr(0, 2), "{\n");
  // A config made here, written and read back.
  acc::ClusterConfig c = acc::default_cluster_config("fp16", 2);
  c.main_process_ip = "host-a";
  c.main_process_port = 1234;
  c.gradient_accumulation_steps = 8;
  acc::save_config_file(c, dir_ / "made.yaml");
  const auto back = acc::load_config_file(dir_ / "made.yaml");
  EXPECT_EQ(back.distributed_type, "MULTI_GPU");
  EXPECT_EQ(back.num_processes, 2);
  EXPECT_EQ(back.mixed_precision, "fp16");
  EXPECT_EQ(back.main_process_ip, "host-a");
  EXPECT_EQ(back.main_process_port, 1234);
  EXPECT_EQ(back.gradient_accumulation_steps, 8);
  EXPECT_TRUE(back.warnings.empty());
}

// Strings stay strings for PyYAML (YAML 1.1, what Accelerate reads its config with): what it would
// take for a date, a number, .inf or a value tag is quoted, anything but printable ASCII is
// double-quoted with escapes; PyYAML's own escapes for U+00A0 and U+0085 read back as UTF-8.
TEST_F(Config, WrittenStringsReadBackAsTheSameStringsInYaml11) {
  const std::string text =
      "distributed_type: 'NO'\nnum_processes: 1\ntpu_name: '2024-01-01'\n"
      "tpu_env: ['.inf', '1_000', '=', '1:20', '0b11', 'a b', 'caf\xc3\xa9', plain_name]\n"
      "main_training_function: \"train\\_main\"\ntpu_zone: \"a\\Nb\\Lc\\x7Fd\"\n";
  const auto config = acc::parse_config_text(text, "quotes.yaml");
  EXPECT_EQ(config.main_training_function, "train\xc2\xa0main") << "U+00A0 in UTF-8";
  const std::string yaml = acc::config_to_yaml(config);
  for (const char* line :
       {"tpu_name: '2024-01-01'", "- '.inf'", "- '1_000'", "- '='", "- '1:20'", "- '0b11'", "- a b", "- \"caf\\xe9\"",
        "- plain_name", "main_training_function: \"train\\xa0main\"", "tpu_zone: \"a\\x85b\\u2028c\\x7fd\""})
    EXPECT_NE(yaml.find(line), std::string::npos) << line << " in\n" << yaml;
  EXPECT_EQ(acc::config_to_yaml(acc::parse_config_text(yaml, "again.yaml")), yaml);
}

TEST_F(Config, ReadsJsonAndOlderFiles) {
  // `accelerate config default` writes JSON (into default_config.yaml, too).
  const auto json = acc::load_config_file(kFixtures / "default_config.json");
  EXPECT_EQ(json.distributed_type, "NO");
  EXPECT_TRUE(json.use_cpu);
  EXPECT_TRUE(json.warnings.empty());
  // Older Accelerate wrote fp16: true and dynamo_backend; `no` unquoted is PyYAML's false.
  auto old = acc::parse_config_text("distributed_type: 'NO'\nfp16: true\ndynamo_backend: 'NO'\n", "old.yaml");
  EXPECT_EQ(old.mixed_precision, "fp16");
  EXPECT_EQ(old.other.count("fp16"), 0u);
  EXPECT_TRUE(old.warnings.empty());
  EXPECT_EQ(acc::parse_config_text("distributed_type: 'NO'\nmixed_precision: no\n", "x").mixed_precision, "no");
  // Any case, as Accelerate's launcher lowercases it.
  EXPECT_EQ(acc::parse_config_text("distributed_type: 'NO'\nmixed_precision: BF16\n", "x").mixed_precision, "bf16");
  auto compiled = acc::parse_config_text("distributed_type: 'NO'\ndynamo_backend: INDUCTOR\n", "x");
  EXPECT_TRUE(mentions(compiled.warnings, "dynamo_config"));
  // A number of processes is implied on one process only.
  EXPECT_EQ(acc::parse_config_text("distributed_type: 'NO'\n", "x").num_processes, 1);
}

TEST_F(Config, ErrorsSayWhereAndWhatToFix) {
  auto parse = [](const std::string& text) { return error_of([&] { acc::parse_config_text(text, "my.yaml"); }); };
  EXPECT_EQ(parse("distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: fp8\n"),
            "my.yaml:3: mixed_precision must be one of no, fp16, bf16 (fp8 is not supported), got 'fp8' "
            "(fix the file, or write a new one with `accelerate config`)");
  EXPECT_NE(parse("distributed_type: MULTI_CPU\nnum_processes: two\n").find("my.yaml:2: num_processes must be an integer"),
            std::string::npos);
  EXPECT_NE(parse("distributed_type: 'NO'\nuse_cpu: maybe\n").find("my.yaml:2: use_cpu must be true or false"),
            std::string::npos);
  EXPECT_NE(parse("distributed_type: XLA\n").find("distributed_type must be one of NO, MULTI_CPU, MULTI_GPU"),
            std::string::npos);
  EXPECT_NE(parse("distributed_type: 'NO'\nmain_process_port: 70000\n").find("main_process_port must be an integer from 0 to 65535"),
            std::string::npos);
  EXPECT_NE(parse("distributed_type: 'NO'\ngpu_ids: first\n").find("gpu_ids must be all or"), std::string::npos);
  EXPECT_NE(parse("compute_environment: AMAZON_SAGEMAKER\ndistributed_type: 'NO'\n").find("SageMaker"), std::string::npos);
  EXPECT_NE(parse("num_processes: 2\n").find("distributed_type is missing"), std::string::npos);
  EXPECT_NE(parse("distributed_type: MULTI_GPU\nnum_processes: 0\n").find("num_processes must be an integer from 1 to"),
            std::string::npos);
  EXPECT_NE(parse("distributed_type: MULTI_GPU\nnum_processes: 3\nnum_machines: 2\n").find("multiple of num_machines"),
            std::string::npos);
  EXPECT_NE(parse("distributed_type: [MULTI_GPU\n").find("my.yaml:2: not valid YAML"), std::string::npos);
  EXPECT_NE(parse("").find("this one is empty"), std::string::npos);
  EXPECT_NE(parse("- a\n- b\n").find("mapping of keys to values"), std::string::npos);
  // A key that is a list or a mapping (an uncaught yaml-cpp exception aborted the launcher), at the
  // top or in a section.
  EXPECT_EQ(parse("distributed_type: MULTI_CPU\n? [a, b]\n: 1\n"),
            "my.yaml:2: a key must be a name, got a list (fix the file, or write a new one with `accelerate config`)");
  EXPECT_NE(parse("distributed_type: FSDP\nfsdp_config:\n  ? {a: 1}\n  : 2\n")
                .find("my.yaml:3: a key must be a name, got a mapping"),
            std::string::npos);
  // What Accelerate's YAML 1.1 reader (PyYAML's safe_load) reads otherwise: a second document is
  // refused there, and 010 is octal 8 (this launched 10 processes).
  EXPECT_NE(parse("distributed_type: MULTI_CPU\nnum_processes: 2\n---\ndistributed_type: 'NO'\n")
                .find("my.yaml:4: a second YAML document"),
            std::string::npos);
  EXPECT_NE(parse("distributed_type: MULTI_CPU\nnum_processes: 010\n")
                .find("my.yaml:2: num_processes must be written "
                      "without a leading zero"),
            std::string::npos);
  // Several machines where Accelerate's launcher would start them all from this one (DeepSpeed's
  // pdsh and other launchers, mpirun's hostfile): this launcher started its own share and waited.
  const std::string ds = "distributed_type: DEEPSPEED\nnum_processes: 4\nnum_machines: 2\nmain_process_ip: 10.0.0.1\n"
                         "main_process_port: 29500\ndeepspeed_config:\n  zero_stage: 2\n";
  EXPECT_NE(parse(ds + "  deepspeed_hostfile: /etc/hosts\n")
                .find("deepspeed_multinode_launcher = pdsh (Accelerate's default) on 2 machines is not supported"),
            std::string::npos);
  EXPECT_NE(parse(ds + "  deepspeed_multinode_launcher: openmpi\n").find("= openmpi on 2 machines is not supported"),
            std::string::npos);
  const auto standard = acc::parse_config_text(ds + "  deepspeed_multinode_launcher: standard\n", "ok.yaml");
  EXPECT_EQ(standard.num_machines, 2);
  for (const auto& warning : standard.warnings) EXPECT_EQ(warning.find("multinode"), std::string::npos) << warning;
  EXPECT_NO_THROW(acc::parse_config_text("distributed_type: DEEPSPEED\nnum_processes: 2\n", "one_machine.yaml"));
  EXPECT_NE(parse("distributed_type: MULTI_CPU\nnum_processes: 4\nmpirun_config:\n  mpirun_ccl: 1\n"
                  "  mpirun_hostfile: /etc/hosts\n")
                .find("my.yaml:5: mpirun_config.mpirun_hostfile is not supported"),
            std::string::npos);
  EXPECT_EQ(acc::parse_config_text("distributed_type: MULTI_CPU\nnum_processes: 10\nmachine_rank: 0\n", "ok.yaml")
                .num_processes,
            10);
  const std::string missing = (dir_ / "nope.yaml").string();
  EXPECT_NE(error_of([&] { acc::find_config_file(missing); }).find("does not exist: pass an existing file to --config_file"),
            std::string::npos);
}

TEST_F(Config, FoundWhereAccelerateLooks) {
  const std::string line = "distributed_type: 'NO'\n";
  EXPECT_EQ(acc::find_config_file(std::nullopt), std::nullopt);
  // $HF_HOME/accelerate, else $XDG_CACHE_HOME/huggingface/accelerate, else ~/.cache/huggingface/accelerate.
  unsetenv("HF_HOME");
  setenv("HOME", (dir_ / "home").c_str(), 1);
  write(dir_ / "home/.cache/huggingface/accelerate/default_config.yaml", line);
  EXPECT_EQ(acc::find_config_file(std::nullopt), (dir_ / "home/.cache/huggingface/accelerate/default_config.yaml").string());
  setenv("XDG_CACHE_HOME", (dir_ / "xdg").c_str(), 1);
  EXPECT_EQ(acc::default_config_path(), (dir_ / "xdg/huggingface/accelerate/default_config.yaml").string());
  EXPECT_EQ(acc::find_config_file(std::nullopt), std::nullopt);  // the first place decides, as in Accelerate
  setenv("HF_HOME", (dir_ / "hf").c_str(), 1);
  write(default_file(), line);
  EXPECT_EQ(acc::find_config_file(std::nullopt), default_file().string());
  // ACCELERATE_CONFIG_FILE (what `accelerate launch --config_file` hands its processes), then a path given.
  write(dir_ / "other.yaml", line);
  setenv("ACCELERATE_CONFIG_FILE", (dir_ / "other.yaml").c_str(), 1);
  EXPECT_EQ(acc::find_config_file(std::nullopt), (dir_ / "other.yaml").string());
  EXPECT_EQ(acc::find_config_file(default_file().string()), default_file().string());
}

TEST_F(Config, LaunchFlagsBeatTheFileWhichBeatsDefaults) {
  const auto file = acc::load_config_file(kFixtures / "every_key.yaml");
  auto defaults = acc::resolve_launch_config({}, std::nullopt, std::nullopt, {"prog"});
  EXPECT_EQ(defaults.num_processes, 1);
  EXPECT_FALSE(defaults.mixed_precision);
  EXPECT_FALSE(defaults.cpu);
  EXPECT_FALSE(defaults.main_process_ip);
  EXPECT_FALSE(defaults.config_file);

  auto from_file = acc::resolve_launch_config({}, file, "f.yaml", {"prog"});
  EXPECT_EQ(from_file.num_processes, 3);
  EXPECT_EQ(from_file.mixed_precision, "bf16");
  EXPECT_EQ(from_file.gradient_accumulation_steps, 4);
  EXPECT_TRUE(from_file.cpu);
  EXPECT_EQ(from_file.main_process_ip, "192.168.0.7");
  EXPECT_EQ(from_file.main_process_port, 29600);
  EXPECT_FALSE(from_file.gpu_ids);  // all: CUDA_VISIBLE_DEVICES is left alone
  EXPECT_EQ(from_file.config_file, "f.yaml");
  auto env = acc::launch_environment(from_file, 0, 29600, 0);
  // Absolute: the program may change its working folder before the library reads the file.
  EXPECT_EQ(env["ACCELERATE_CONFIG_FILE"], (std::filesystem::current_path() / "f.yaml").string());
  EXPECT_EQ(env["ACCELERATE_MIXED_PRECISION"], "bf16");
  EXPECT_EQ(env.count("ACCELERATE_DEBUG_MODE"), 0u);

  acc::LaunchFlags flags;
  flags.num_processes = 2;
  flags.mixed_precision = "no";
  flags.gradient_accumulation_steps = 1;
  flags.main_process_port = 0;  // a free port
  flags.gpu_ids = "1";
  flags.debug = true;
  auto flagged = acc::resolve_launch_config(flags, file, "f.yaml", {"prog"});
  EXPECT_EQ(flagged.num_processes, 2);
  EXPECT_EQ(flagged.mixed_precision, "no");
  EXPECT_EQ(flagged.gradient_accumulation_steps, 1);
  EXPECT_FALSE(flagged.main_process_port);
  EXPECT_EQ(flagged.gpu_ids, "1");
  EXPECT_EQ(acc::launch_environment(flagged, 0, 1, 0)["ACCELERATE_DEBUG_MODE"], "true");
}

// num_processes -1 (or missing) is Accelerate's "not set": the file reads, and a launch takes the
// count from --num_processes, or says to pass it.
TEST_F(Config, AnUnsetProcessCountComesFromTheCommandLine) {
  for (const char* text : {"distributed_type: MULTI_CPU\nnum_processes: -1\n", "distributed_type: MULTI_CPU\n"}) {
    const auto file = acc::parse_config_text(text, "unset.yaml");
    EXPECT_EQ(file.num_processes, -1);
    EXPECT_NE(error_of([&] {
                acc::resolve_launch_config({}, file, std::string("unset.yaml"), {"prog"});
              }).find("unset.yaml leaves num_processes unset (-1, or missing): pass --num_processes"),
              std::string::npos);
    acc::LaunchFlags flags;
    flags.num_processes = 2;
    EXPECT_EQ(acc::resolve_launch_config(flags, file, std::string("unset.yaml"), {"prog"}).num_processes, 2);
    EXPECT_NE(acc::config_to_yaml(file).find("num_processes: -1"), std::string::npos)
        << "written back as Accelerate does";
  }
}

// Several machines need machine 0's address (Accelerate's launcher asserts it); without it they
// would wait for themselves.
TEST_F(Config, SeveralMachinesNeedTheMainProcessAddress) {
  acc::LaunchFlags flags;
  flags.num_processes = 2;
  flags.num_machines = 2;
  flags.machine_rank = 1;
  flags.main_process_port = 29555;
  auto c = acc::resolve_launch_config(flags, std::nullopt, std::nullopt, {"prog"});
  EXPECT_NE(error_of([&] { acc::validate_launch_config(c); }).find("needs --main_process_ip"), std::string::npos);
  c.main_process_ip = "10.0.0.1";
  acc::validate_launch_config(c);
  EXPECT_EQ(acc::launch_environment(c, 0, 29555, 0)["MASTER_ADDR"], "10.0.0.1");
}

TEST_F(Config, TheAcceleratorReadsTheFileLast) {
  auto resolve = [](const acc::Options& o) { return acc::resolve_accelerator_config(o); };
  acc::Options none(acc::accelerator_option_table());
  EXPECT_EQ(resolve(none).mixed_precision, "no");  // no file: defaults
  write(default_file(), "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: bf16\n"
                        "gradient_accumulation_steps: 3\nfsdp_config: {fsdp_offload_params: true}\n");
  auto c = resolve(none);
  EXPECT_EQ(c.mixed_precision, "bf16");
  EXPECT_EQ(c.gradient_accumulation_steps, 3);
  EXPECT_TRUE(c.cpu);  // MULTI_CPU
  setenv("ACCELERATE_MIXED_PRECISION", "no", 1);
  EXPECT_EQ(resolve(none).mixed_precision, "no");  // the environment beats the file
  acc::Options set(acc::accelerator_option_table());
  set.set("gradient_accumulation_steps", int64_t{5});
  set.set("cpu", false);
  EXPECT_EQ(resolve(set).gradient_accumulation_steps, 5);  // and the program beats both
  EXPECT_FALSE(resolve(set).cpu);
  // A broken file found without being asked for says which file, and how to use another.
  write(default_file(), "distributed_type: MULTI_CPU\nnum_processes: lots\n");
  unsetenv("ACCELERATE_MIXED_PRECISION");
  const std::string e = error_of([&] { resolve(none); });
  EXPECT_NE(e.find(default_file().string() + ":2: num_processes must be"), std::string::npos) << e;
  EXPECT_NE(e.find("set HF_HOME or ACCELERATE_CONFIG_FILE"), std::string::npos) << e;
  // A program that sets everything the file could give never reads it.
  set.set("mixed_precision", std::string("no"));
  set.set("zero_stage", int64_t{0});
  EXPECT_NO_THROW(resolve(set));
}

TEST_F(Config, AProcessAnotherLauncherStartedReadsNoDefaultFile) {
  // Accelerate's launcher (which always passes ACCELERATE_MIXED_PRECISION), torchrun, or several
  // processes started otherwise: the default file may not be the job's (their --config_file is not
  // passed on), and Accelerate's processes read none. It was read, and its values used (or a broken
  // one refused the job).
  auto resolve = [] { return acc::resolve_accelerator_config(acc::Options(acc::accelerator_option_table())); };
  write(default_file(),
        "distributed_type: MULTI_CPU\nnum_processes: 2\nmixed_precision: bf16\n"
        "gradient_accumulation_steps: 3\n");
  for (const auto& [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"ACCELERATE_MIXED_PRECISION", "no"}, {"TORCHELASTIC_RUN_ID", "none"}, {"WORLD_SIZE", "2"}}) {
    setenv(name, value, 1);
    const auto c = resolve();
    EXPECT_EQ(c.mixed_precision, "no") << name;
    EXPECT_EQ(c.gradient_accumulation_steps, 1) << name;
    EXPECT_FALSE(c.cpu) << name;
    // A file named for the process is still read.
    const fs::path named = dir_ / "job.yaml";
    write(named, "distributed_type: MULTI_CPU\ngradient_accumulation_steps: 4\n");
    setenv("ACCELERATE_CONFIG_FILE", named.c_str(), 1);
    EXPECT_EQ(resolve().gradient_accumulation_steps, 4) << name;
    unsetenv("ACCELERATE_CONFIG_FILE");
    unsetenv(name);
  }
  EXPECT_EQ(resolve().gradient_accumulation_steps, 3);  // a process started by hand reads it
}

// The sharding questions (DeepSpeed's, then FSDP's) write Accelerate's sections, which read back as
// the launcher's variables.
TEST_F(Config, QuestionsMakeShardedConfigs) {
  std::ostringstream out;
  // multi-CPU, 1 machine, 2 processes, no debug, no DeepSpeed, FSDP: version 1, SHARD_GRAD_OP, no
  // offload, SIZE_BASED_WRAP of 1000, SHARDED_STATE_DICT, no CPU RAM efficient loading, activation
  // checkpointing; no mixed precision, 1 step.
  std::istringstream fsdp_answers("1\n\n2\n\n\nyes\n0\n1\n\n1\n1000\n1\nno\nyes\n\n\n");
  auto f = acc::ask_cluster_config(fsdp_answers, out, false, 0);
  EXPECT_EQ(f.distributed_type, "FSDP");
  EXPECT_TRUE(f.use_cpu);
  EXPECT_EQ(f.sharding_env.at("FSDP_SHARDING_STRATEGY"), "SHARD_GRAD_OP");
  EXPECT_EQ(f.sharding_env.at("FSDP_AUTO_WRAP_POLICY"), "SIZE_BASED_WRAP");
  EXPECT_EQ(f.sharding_env.at("FSDP_MIN_NUM_PARAMS"), "1000");
  EXPECT_EQ(f.sharding_env.at("FSDP_STATE_DICT_TYPE"), "SHARDED_STATE_DICT");
  EXPECT_EQ(f.sharding_env.at("FSDP_CPU_RAM_EFFICIENT_LOADING"), "false");
  EXPECT_EQ(f.sharding_env.at("FSDP_ACTIVATION_CHECKPOINTING"), "true");
  write(default_file(), acc::config_to_yaml(f));
  const auto reread = acc::load_config_file(default_file().string());
  EXPECT_EQ(reread.distributed_type, "FSDP");
  EXPECT_EQ(reread.sharding_env, f.sharding_env);
  EXPECT_NE(acc::config_to_yaml(f).find("fsdp_min_num_params: 1000"), std::string::npos) << acc::config_to_yaml(f);
  // FSDP2 (Accelerate's default version) with its parallelism config: 4 processes, resharding after
  // forward, NO_WRAP, 2 replicas of 2 shards.
  std::istringstream fsdp2_answers("1\n\n4\n\n\nyes\n\n\n\n2\n\n\n\nyes\n2\n2\n\n");
  auto f2 = acc::ask_cluster_config(fsdp2_answers, out, false, 0);
  EXPECT_EQ(f2.sharding_env.at("FSDP_VERSION"), "2");
  EXPECT_EQ(f2.sharding_env.at("FSDP_RESHARD_AFTER_FORWARD"), "true");
  EXPECT_EQ(f2.sharding_env.at("FSDP_STATE_DICT_TYPE"), "SHARDED_STATE_DICT") << "FSDP2's default, as Accelerate's";
  EXPECT_EQ(f2.sharding_env.at("PARALLELISM_CONFIG_DP_SHARD_SIZE"), "2");
  EXPECT_EQ(f2.sharding_env.at("PARALLELISM_CONFIG_DP_REPLICATE_SIZE"), "2");
  const std::string f2_yaml = acc::config_to_yaml(f2);
  EXPECT_NE(f2_yaml.find("parallelism_config_dp_shard_size: 2"), std::string::npos) << f2_yaml;
  EXPECT_EQ(acc::parse_config_text(f2_yaml, "fsdp2.yaml").sharding_env, f2.sharding_env) << f2_yaml;
  // DeepSpeed: ZeRO-3, optimizer and parameters offloaded, clipping at 0.5, 16-bit weights, zero.Init.
  std::istringstream ds_answers("1\n\n2\n\nyes\n\n3\n1\n1\n4\nyes\n0.5\nyes\nyes\n\n");
  auto d = acc::ask_cluster_config(ds_answers, out, false, 0);
  EXPECT_EQ(d.distributed_type, "DEEPSPEED");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_DEEPSPEED_ZERO_STAGE"), "3");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"), "cpu");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"), "cpu");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_GRADIENT_CLIPPING"), "0.5");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"), "true");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_DEEPSPEED_ZERO3_INIT"), "true");
  EXPECT_EQ(d.sharding_env.at("ACCELERATE_GRADIENT_ACCUMULATION_STEPS"), "4") << "asked in DeepSpeed's section";
  EXPECT_FALSE(d.gradient_accumulation_steps.has_value()) << "not also as this runtime's own key";
  EXPECT_NE(acc::config_to_yaml(d).find("zero_stage: 3"), std::string::npos) << acc::config_to_yaml(d);
}

TEST_F(Config, QuestionsMakeAConfig) {
  std::istringstream in("2\n1\n4\n0,1\nyes\n\n\nbf16\n");
  std::ostringstream out;
  auto c = acc::ask_cluster_config(in, out, false, 4);
  EXPECT_EQ(c.distributed_type, "MULTI_GPU");
  EXPECT_EQ(c.num_processes, 4);
  EXPECT_EQ(c.gpu_ids, "0,1");
  EXPECT_TRUE(c.debug);
  EXPECT_FALSE(c.use_cpu);
  EXPECT_EQ(c.mixed_precision, "bf16");
  // Not asked, as in Accelerate (whose launcher refuses the runtime's own top-level key).
  EXPECT_FALSE(c.gradient_accumulation_steps.has_value());
  EXPECT_EQ(out.str().find("gradient accumulation"), std::string::npos);
  EXPECT_NE(out.str().find("How many processes in total"), std::string::npos);
  // Empty answers take the defaults: one CPU process on a machine without GPUs.
  std::istringstream empty("\n\n\n");
  auto d = acc::ask_cluster_config(empty, out, false, 0);
  EXPECT_EQ(d.distributed_type, "NO");
  EXPECT_TRUE(d.use_cpu);
  EXPECT_EQ(d.mixed_precision, "no");
  // Multi-node asks where the main process is.
  std::istringstream nodes("1\n2\n1\n10.0.0.1\n\n\n\n\n\n\n\n\n");
  auto n = acc::ask_cluster_config(nodes, out, false, 0);
  EXPECT_EQ(n.num_machines, 2);
  EXPECT_EQ(n.machine_rank, 1);
  EXPECT_EQ(n.main_process_ip, "10.0.0.1");
  EXPECT_EQ(n.main_process_port, 29500);
  EXPECT_EQ(n.num_processes, 4);
  EXPECT_TRUE(n.use_cpu);
  // Off a terminal a wrong answer, or too few, is an error naming the question.
  std::istringstream wrong("7\n");
  EXPECT_NE(error_of([&] { acc::ask_cluster_config(wrong, out, false, 0); }).find("answer '7' to 'Your choice'"),
            std::string::npos);
  std::istringstream short_input("2\n");
  EXPECT_NE(error_of([&] { acc::ask_cluster_config(short_input, out, false, 0); }).find("the input ended before"),
            std::string::npos);
  // On a terminal a wrong answer is asked again.
  std::istringstream retry("9\n1\n\n3\n\n\n\n\n\n");
  EXPECT_EQ(acc::ask_cluster_config(retry, out, true, 0).num_processes, 3);
}

TEST(EstimateMemory, CountsWeightsGradientsAndAdamStates) {
  auto model = acc::model_from_spec(R"([{"type":"linear","in_features":10,"out_features":20},{"type":"relu"},
                                         {"type":"linear","in_features":20,"out_features":5},
                                         {"type":"batchnorm1d","num_features":5}])");
  auto s = acc::model_sizes(*model);
  EXPECT_EQ(s.parameters, 220 + 105 + 10);
  EXPECT_EQ(s.trainable, 335);
  EXPECT_EQ(s.buffers, 11);  // running mean, running var, num_batches_tracked
  EXPECT_EQ(s.largest_layer, "0");
  EXPECT_EQ(s.largest_layer_elements, 220);
  auto rows = acc::memory_rows(s, {"float32", "bfloat16", "int4"});
  EXPECT_EQ(rows[0].weights, 346 * 4);
  EXPECT_EQ(rows[0].gradients, 335 * 4);
  EXPECT_EQ(rows[0].adam, 335 * 8);
  EXPECT_EQ(rows[0].training, 346 * 4 + 335 * 12);
  EXPECT_EQ(rows[1].weights, 346 * 2);
  EXPECT_EQ(rows[2].weights, 173);
  EXPECT_LT(rows[2].training, 0);  // no training in int4
  EXPECT_EQ(acc::format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(acc::format_bytes(3.5 * 1024 * 1024 * 1024), "3.50 GiB");
  const std::string table = acc::memory_table("`m`", s, rows);
  EXPECT_NE(table.find("335 parameters (335 trainable)"), std::string::npos) << table;
  EXPECT_NE(table.find("5.28 KiB"), std::string::npos) << table;  // float32 training: 5404 bytes
  EXPECT_NE(error_of([&] { acc::memory_rows(s, {"float8"}); }).find("unknown dtype 'float8'"), std::string::npos);
}

// Found by a hunt: the largest layer was a top-level child however deep the model (a whole stack of
// blocks). As Accelerate's get_max_layer_size finds it: modules without children; one with children
// counts as its children, its own tensors left out (nn.MultiheadAttention's in_proj: only out_proj).
TEST(EstimateMemory, TheLargestLayerIsAModuleWithoutChildrenAsAccelerateFindsIt) {
  auto model = acc::model_from_spec(R"([{"type":"linear","in_features":6,"out_features":8},
    {"type":"transformer_encoder_layer","d_model":8,"nhead":2,"dim_feedforward":16,"dropout":0.0,"batch_first":true},
    {"type":"linear","in_features":8,"out_features":3}])");
  const auto s = acc::model_sizes(*model);
  EXPECT_EQ(s.largest_layer, "1.linear1");
  EXPECT_EQ(s.largest_layer_elements, 8 * 16 + 16);
}

// JSON written as YAML reads back the same (texts that look like numbers or booleans stay texts, a
// float with an exponent stays a float for YAML 1.1 readers); aliases that expand past the bound are
// refused, naming the file.
TEST(YamlJson, RoundTripsAndBoundsAliases) {
  const nlohmann::json value = nlohmann::json::parse(
      R"({"lr": 1e-05, "name": "true", "n": "12", "layers": [64, 32], "nested": {"a": 1, "b": null, "c": false},
          "empty": {}, "none": [], "half": 0.5})");
  YAML::Emitter out;
  acc::emit_json_as_yaml(out, value);
  const std::string text = out.c_str();
  EXPECT_NE(text.find("lr: 1.0e-05"), std::string::npos) << text;
  EXPECT_EQ(acc::yaml_to_json(YAML::Load(text), "params.yaml"), value) << text;
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c)
    laughs += std::string(1, c) + ": &" + c + " [*" + char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + ", *" +
              char(c - 1) + ", *" + char(c - 1) + ", *" + char(c - 1) + "]\n";
  try {
    acc::yaml_to_json(YAML::Load(laughs), "laughs.yaml");
    FAIL() << "the aliases expanded";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("laughs.yaml: the YAML expands to too many values"), std::string::npos)
        << e.what();
  }
}

// What PyYAML's reader does with the characters of a file: a NUL (which yaml-cpp would read as an
// escape, turning "3<NUL>0" into 3) and other controls refused naming the line; carriage returns,
// alone or before line feeds, are line breaks.
TEST_F(Config, ControlCharactersAreRefusedAndCarriageReturnsBreakLines) {
  const std::string nul = std::string("distributed_type: MULTI_CPU\nnum_processes: 3") + '\0' + "0\n";
  try {
    acc::parse_config_text(nul, "nul.yaml");
    ADD_FAILURE() << "a NUL byte was accepted";
  } catch (const acc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("nul.yaml:2: the control character 0x00"), std::string::npos) << e.what();
  }
  EXPECT_THROW(acc::parse_config_text("mixed_precision: bf16\x1b\n", "esc.yaml"), acc::Error);
  for (const char* breaks : {"\r", "\r\n"}) {
    const std::string text = std::string("distributed_type: MULTI_CPU") + breaks + "use_cpu: true" + breaks +
                             "mixed_precision: bf16" + breaks + "num_processes: 2" + breaks;
    const auto c = acc::parse_config_text(text, "cr.yaml");
    EXPECT_EQ(c.mixed_precision, "bf16");
    EXPECT_TRUE(c.use_cpu);
    EXPECT_EQ(c.num_processes, 2);
  }
  // A last line ended by a carriage return alone.
  EXPECT_EQ(acc::parse_config_text("distributed_type: MULTI_CPU\nmixed_precision: bf16\r", "end.yaml").mixed_precision,
            "bf16");
}
