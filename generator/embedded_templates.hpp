// The device templates compiled into the library (see cmake/EmbedTemplates.cmake).
#pragma once

#include <string>
#include <vector>

namespace flashjit::detail {

struct EmbeddedTemplate {
  std::string path;  // relative to templates/, e.g. "sm90/attention_fwd.cuh"
  std::string text;
};

const std::vector<EmbeddedTemplate>& embedded_templates();

}  // namespace flashjit::detail
