#include "accelerator/option_schemas.h"

#include "accelerator/config.h"
#include "common/error.h"
#include "data/dataloader_options.h"
#include "model/peft/eva.h"
#include "model/peft/lora.h"
#include "model/peft/weighted_adapter.h"
#include "optim/averaged_model.h"
#include "optim/optimizer_options.h"
#include "profiling/profile_config.h"
#include "schedule/schedule_options.h"

namespace acc {

const OptionSchema& option_schema(OptionsKind kind) {
  switch (kind) {
    case OptionsKind::Accelerator: return accelerator_option_table();
    case OptionsKind::Optimizer: return optimizer_option_schema();
    case OptionsKind::Scheduler: return scheduler_option_table();
    case OptionsKind::DataLoader: return dataloader_option_table();
    case OptionsKind::Lora: return lora_option_table();
    case OptionsKind::Profile: return profile_option_table();
    case OptionsKind::AveragedModel: return averaging_option_table();
    case OptionsKind::TrainableTokens:
      return trainable_tokens_option_table();
    case OptionsKind::WeightedAdapter:
      return weighted_adapter_option_table();
    case OptionsKind::Eva:
      return eva_option_table();
    case OptionsKind::Ia3:
      return ia3_option_table();
    case OptionsKind::Loha:
      return loha_option_table();
    case OptionsKind::Lokr:
      return lokr_option_table();
    case OptionsKind::Vera:
      return vera_option_table();
    case OptionsKind::Oft:
      return oft_option_table();
    case OptionsKind::Adalora:
      return adalora_option_table();
    case OptionsKind::Boft:
      return boft_option_table();
    case OptionsKind::Hra:
      return hra_option_table();
    case OptionsKind::Fourierft:
      return fourierft_option_table();
    case OptionsKind::LnTuning:
      return ln_tuning_option_table();
    case OptionsKind::Miss:
      return miss_option_table();
    case OptionsKind::C3a:
      return c3a_option_table();
    case OptionsKind::Shira:
      return shira_option_table();
    case OptionsKind::Randlora:
      return randlora_option_table();
    case OptionsKind::Delora:
      return delora_option_table();
    case OptionsKind::Road:
      return road_option_table();
    case OptionsKind::Gralora:
      return gralora_option_table();
    case OptionsKind::Hira:
      return hira_option_table();
    case OptionsKind::Pvera:
      return pvera_option_table();
  }
  fail(Status::InvalidArgument, "unknown options kind ", static_cast<int>(kind));
}

}  // namespace acc
