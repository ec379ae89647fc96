// Python Accelerate's launch flags for what this runtime does not do (a TPU, Megatron-LM, mpirun,
// torch.compile, fp8, SageMaker): taken under their names so that a command line written for
// `accelerate launch` runs, and answered as Accelerate would need them answered here.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace acc {

struct PythonOnlyFlag {
  enum class Answer {
    Refused,   // the job would need it: an error (ACC_ERR_UNSUPPORTED)
    Warned,    // the job would only run differently: a warning
    Accepted,  // it only qualifies a refused or warned flag (as --fp8_* qualify --mixed_precision fp8)
  };
  std::string name;  // without dashes
  bool takes_value = false;
  Answer answer = Answer::Accepted;
  std::string why;                   // for Refused and Warned
  std::vector<std::string> choices;  // Accelerate's, where its argparse checks them (empty: any)
  std::string neutral;               // a value that asks for nothing (e.g. dynamo_backend's "no")
};

const std::vector<PythonOnlyFlag>& python_only_flags();

// The flags given (name -> their values; a switch's value is "true"): throws ACC_ERR_UNSUPPORTED for
// a refused one, returns the warnings.
std::vector<std::string> check_python_only_flags(const std::map<std::string, std::vector<std::string>>& given);

}  // namespace acc
