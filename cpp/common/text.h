// Small string helpers the option and name parsers share.
#pragma once

#include <string>

namespace acc {

// `text` without the spaces and tabs around it.
std::string trimmed(const std::string& text);
bool ends_with(const std::string& text, const std::string& tail);

}  // namespace acc
