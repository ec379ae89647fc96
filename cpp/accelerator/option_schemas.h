// Every options kind's table by its kind (the C API's acc_options_kind). The tables live beside the
// settings they fill: data/dataloader_options, optim/optimizer_options,
// schedule/schedule_options, accelerator/config.
#pragma once

#include "common/options.h"

namespace acc {

// An unknown kind is InvalidArgument.
const OptionSchema& option_schema(OptionsKind kind);

}  // namespace acc
