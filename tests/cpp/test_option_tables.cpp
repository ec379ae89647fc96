// Each options kind's table (common/option_table.h) sends every key to its own member: setting one
// key changes what the table reads back for that key and for no other. The optimizer's keys are
// exactly those its algorithms take.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "accelerator/config.h"
#include "data/dataloader_options.h"
#include "model/peft/lora.h"
#include "optim/algorithm.h"
#include "optim/optimizer_options.h"
#include "schedule/schedule_options.h"

namespace {

// A value of `spec` other than its default, within its bounds and choices.
acc::OptionValue other_value(const acc::OptionSpec& spec) {
  switch (spec.type) {
    case acc::OptionType::Bool: return !(spec.fallback && std::get<bool>(*spec.fallback));
    case acc::OptionType::Int: {
      for (const int64_t choice : spec.int_choices)
        if (!spec.fallback || choice != std::get<int64_t>(*spec.fallback)) return choice;
      const int64_t base = spec.fallback ? std::get<int64_t>(*spec.fallback) : static_cast<int64_t>(spec.min.value_or(0));
      return spec.max && base + 1 > *spec.max ? base - 1 : base + 1;
    }
    case acc::OptionType::Double: {
      const double base = spec.fallback ? std::get<double>(*spec.fallback) : spec.min.value_or(0.0);
      return spec.max && base + 0.25 > *spec.max ? base - 0.25 : base + 0.25;
    }
    case acc::OptionType::Numbers: return std::string("0.5,0.25");  // one per group of two
    case acc::OptionType::String:
      for (const auto& choice : spec.choices)
        if (!spec.fallback || choice != std::get<std::string>(*spec.fallback)) return choice;
      return std::string("cpu");  // a string any key takes (the loader's device parses it)
  }
  return int64_t{0};
}

template <class Settings>
void expect_each_key_reaches_its_member(const acc::OptionTable<Settings>& table) {
  const Settings defaults;
  for (const auto& spec : table.specs) {
    EXPECT_FALSE(spec.doc.empty()) << spec.key;
    EXPECT_EQ(table.value(defaults, spec.key), spec.fallback) << spec.key << ": the default is the member's";
    acc::Options options(table);
    const acc::OptionValue value = other_value(spec);
    options.set(spec.key, value);
    const Settings copied = table.read(options);
    EXPECT_EQ(table.value(copied, spec.key), value) << spec.key;
    for (const auto& other : table.specs)
      if (other.key != spec.key)
        EXPECT_EQ(table.value(copied, other.key), other.fallback) << spec.key << " changed " << other.key;
  }
}

}  // namespace

TEST(OptionTables, EachAcceleratorKeyReachesItsMember) {
  expect_each_key_reaches_its_member(acc::accelerator_option_table());
}

TEST(OptionTables, EachDataLoaderKeyReachesItsMember) {
  expect_each_key_reaches_its_member(acc::dataloader_option_table());
}

TEST(OptionTables, EachSchedulerKeyReachesItsMember) {
  expect_each_key_reaches_its_member(acc::scheduler_option_table());
}

TEST(OptionTables, EachLoraKeyReachesItsMember) {
  expect_each_key_reaches_its_member(acc::lora_option_table());
}

TEST(OptionTables, SubConfigsHoldTheDefaults) {
  const acc::AcceleratorConfig c;
  EXPECT_EQ(c.scaler.init_scale, acc::GradScalerOptions{}.init_scale);
  const auto& table = acc::accelerator_option_table();
  EXPECT_EQ(table.find("scaler_init_scale")->fallback, acc::OptionValue(65536.0));
  EXPECT_EQ(table.find("ddp_bucket_cap_mb")->fallback, acc::OptionValue(int64_t{25}));
  EXPECT_EQ(table.find("zero_stage")->fallback, acc::OptionValue(int64_t{0}));
  EXPECT_EQ(table.find("state_dict_type")->fallback, acc::OptionValue(std::string("FULL_STATE_DICT")));
  EXPECT_FALSE(table.find("seed")->fallback) << "an unset optional has no default";
}

TEST(OptionTables, TheOptimizerKeysAreThoseItsAlgorithmsTake) {
  std::set<std::string> taken, schema;
  for (const char* name : {"sgd",
                           "adam",
                           "adamw",
                           "rmsprop",
                           "adagrad",
                           "lion",
                           "adafactor",
                           "radam",
                           "nadam",
                           "adamax",
                           "adadelta",
                           "rprop",
                           "asgd",
                           "adamw_schedule_free",
                           "sgd_schedule_free",
                           "lomo",
                           "adalomo",
                           "adam_8bit",
                           "adamw_8bit",
                           "ademamix_8bit",
                           "lion_8bit",
                           "sgd_8bit",
                           "rmsprop_8bit",
                           "adagrad_8bit"})
    for (const auto& key : acc::optimizer_algorithm(name).keys()) taken.insert(key);
  for (const auto& spec : acc::optimizer_option_schema().specs) {
    schema.insert(spec.key);
    EXPECT_FALSE(spec.doc.empty()) << spec.key;
    EXPECT_FALSE(spec.fallback) << spec.key << ": the optimizer's defaults are its algorithms'";
  }
  EXPECT_EQ(taken, schema);
}
