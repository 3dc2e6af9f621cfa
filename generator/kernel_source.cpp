#include "generator/kernel_source.hpp"

namespace flashjit {

nlohmann::json to_json(const LaunchInfo& l) {
  nlohmann::json j = {{"family", l.family},       {"entry", l.entry},         {"threads", l.threads},
                      {"smem_bytes", l.smem_bytes}, {"block_m", l.block_m},   {"block_n", l.block_n},
                      {"cluster_m", l.cluster_m}, {"persistent", l.persistent}, {"tile_counter", l.tile_counter},
                      {"uses_tma", l.uses_tma}, {"tma_store_o", l.tma_store_o}, {"lpt_l2_bytes", l.lpt_l2_bytes}};
  // Written only for operations of several kernels, so single-kernel launch data stays as it was.
  for (const auto& pass : l.passes)
    j["passes"].push_back(
        {{"role", pass.role}, {"entry", pass.entry}, {"threads", pass.threads}, {"smem_bytes", pass.smem_bytes}});
  return j;
}

LaunchInfo launch_info_from_json(const nlohmann::json& j) {
  LaunchInfo l;
  l.family = j.at("family").get<std::string>();
  l.entry = j.at("entry").get<std::string>();
  l.threads = j.at("threads").get<int>();
  l.smem_bytes = j.at("smem_bytes").get<int>();
  l.block_m = j.at("block_m").get<int>();
  l.block_n = j.at("block_n").get<int>();
  l.cluster_m = j.at("cluster_m").get<int>();
  l.persistent = j.at("persistent").get<bool>();
  l.tile_counter = j.at("tile_counter").get<bool>();
  l.uses_tma = j.at("uses_tma").get<bool>();
  l.tma_store_o = j.at("tma_store_o").get<bool>();
  l.lpt_l2_bytes = j.at("lpt_l2_bytes").get<long long>();
  if (auto it = j.find("passes"); it != j.end())
    for (const auto& pass : it->get_ref<const nlohmann::json::array_t&>())
      l.passes.push_back({pass.at("role").get<std::string>(), pass.at("entry").get<std::string>(),
                          pass.at("threads").get<int>(), pass.at("smem_bytes").get<int>()});
  return l;
}

}  // namespace flashjit
