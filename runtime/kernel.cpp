// Loaded kernels: a cubin in the current context, launched with cuLaunchKernelEx, memoised per
// (context, config) so the warm path is one lookup.
#include "runtime/flashjit.hpp"

#include "cache/memory_table.hpp"
#include "generator/arch.hpp"
#include "generator/generate.hpp"
#include "generator/resolve.hpp"
#include "runtime/device.hpp"
#include "runtime/driver.hpp"
#include "runtime/family_host.hpp"
#include "runtime/nvrtc_targets.hpp"
#include "runtime/tile_counters.hpp"
#include "runtime/workspaces.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace flashjit {

Tensor Tensor::bshd(const void* data, int64_t seqlen, int64_t heads, int64_t dim) {
  return {data, seqlen * heads * dim, heads * dim, dim};
}
Tensor Tensor::bhsd(const void* data, int64_t seqlen, int64_t heads, int64_t dim) {
  return {data, heads * seqlen * dim, dim, seqlen * dim};
}
Tensor Tensor::packed(const void* data, int64_t heads, int64_t dim) {
  return {data, 0, heads * dim, dim};
}
Tensor Tensor::paged(const void* data, int64_t page_size, int64_t heads, int64_t dim) {
  return {data, page_size * heads * dim, heads * dim, dim};
}

namespace {

class LoadedKernel final : public Kernel {
 public:
  LoadedKernel(Artifact artifact, Config resolved, const DeviceInfo& device)
      : artifact_(std::move(artifact)),
        config_(std::move(resolved)),
        device_(device),
        host_(family_host(artifact_.launch.family)) {
    const DriverApi& d = driver();
    const LaunchInfo& li = artifact_.launch;
    FLASHJIT_CU(d.cuModuleLoadData(&module_, artifact_.cubin.data()));
    load_function(li.entry, li.smem_bytes);
    for (const KernelPass& pass : li.passes) load_function(pass.entry, pass.smem_bytes);
    limits_.sm_count = device_.sm_count;
    limits_.resident_ctas = li.cluster_m > 1 ? resident_cluster_ctas() : device_.sm_count;
    int per_sm = 0;
    FLASHJIT_CU(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, functions_[0], li.threads, li.smem_bytes));
    limits_.ctas_per_sm = std::max(1, per_sm);
    // A pass may overlap the one before only where its code waits for it (griddepcontrol, in
    // kernels compiled for sm_90 and later) and the device honours the launch attribute.
    const std::optional<ArchInfo> target = parse_arch(config_.arch);
    dependent_launches_ = device_.cc_major >= 9 && target && target->major >= 9;
  }
  // Modules live as long as the process: the table that owns kernels is never destroyed, so
  // nothing unloads a module after the driver has shut down.
  ~LoadedKernel() override = default;

  const Config& config() const override { return config_; }
  const Artifact& artifact() const override { return artifact_; }

  size_t workspace_bytes(const AttentionArgs& args) const override {
    return host_.plan(config_, artifact_.launch, args, limits_).workspace_bytes;
  }

  void launch(const AttentionArgs& args, CUstream stream) const override {
    const LaunchInfo& li = artifact_.launch;
    LaunchPlan plan = host_.plan(config_, li, args, limits_);
    if (plan.num_passes == 0) return;
    void* workspace = nullptr;
    if (plan.workspace_bytes > 0) {
      if (args.workspace) {
        if (args.workspace_bytes < plan.workspace_bytes)
          throw ArgumentError("flashjit launch: args.workspace_bytes = " + std::to_string(args.workspace_bytes) +
                              ": this launch needs " + std::to_string(plan.workspace_bytes));
        if (reinterpret_cast<uintptr_t>(args.workspace) % 16)
          throw ArgumentError("flashjit launch: args.workspace must be 16-byte aligned");
        workspace = args.workspace;
      } else {
        workspace = workspace_for(device_.context, stream, plan.workspace_bytes);
      }
    }
    host_.finish(config_, li, args, workspace, plan);
    if (plan.tile_counter)
      plan.params.tile_counter = args.tile_counter ? args.tile_counter : tile_counter_for(device_.context, stream);
    for (int i = 0; i < plan.num_passes; ++i) launch_pass(plan.passes[i], plan.params, stream);
  }

 private:
  void load_function(const std::string& entry, int smem) {
    const DriverApi& d = driver();
    CUfunction f = nullptr;
    FLASHJIT_CU(d.cuModuleGetFunction(&f, module_, entry.c_str()));
    if (smem > device_.max_smem_optin)
      throw ArgumentError("kernel " + artifact_.name + " needs " + std::to_string(smem) +
                          " bytes of shared memory; " + device_.name + " allows " +
                          std::to_string(device_.max_smem_optin));
    if (smem > 0) FLASHJIT_CU(d.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
    functions_.push_back(f);
  }

  void launch_pass(const PassLaunch& pass, const AttentionParams& params, CUstream stream) const {
    CUlaunchConfig cfg = {};
    cfg.gridDimX = pass.grid[0];
    cfg.gridDimY = pass.grid[1];
    cfg.gridDimZ = pass.grid[2];
    cfg.blockDimX = pass.threads;
    cfg.blockDimY = 1;
    cfg.blockDimZ = 1;
    cfg.sharedMemBytes = pass.smem_bytes;
    cfg.hStream = stream;
    CUlaunchAttribute attr[2];
    set_cluster(cfg, attr, pass.cluster_m);
    if (pass.overlaps_previous && dependent_launches_) {
      attr[cfg.numAttrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr[cfg.numAttrs].value.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = attr;
      ++cfg.numAttrs;
    }
    void* kernel_args[] = {const_cast<AttentionParams*>(&params)};
    FLASHJIT_CU(driver().cuLaunchKernelEx(&cfg, functions_[pass.kernel], kernel_args, nullptr));
  }

  static void set_cluster(CUlaunchConfig& cfg, CUlaunchAttribute (&attr)[2], int cluster_m) {
    if (cluster_m <= 1) return;
    attr[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr[0].value.clusterDim.x = cluster_m;
    attr[0].value.clusterDim.y = 1;
    attr[0].value.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }

  // CTAs of a clustered kernel that run at once: the GPCs may fit fewer clusters than SMs / 2,
  // and a persistent grid larger than that would run its last clusters in a second wave.
  int resident_cluster_ctas() const {
    const LaunchInfo& li = artifact_.launch;
    CUlaunchConfig cfg = {};
    cfg.gridDimX = li.cluster_m;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = li.threads;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = li.smem_bytes;
    CUlaunchAttribute attr[2];
    set_cluster(cfg, attr, li.cluster_m);
    int clusters = 0;
    FLASHJIT_CU(driver().cuOccupancyMaxActiveClusters(&clusters, functions_[0], &cfg));
    if (clusters < 1)
      throw ArgumentError("kernel " + artifact_.name + ": " + device_.name + " cannot run a cluster of " +
                          std::to_string(li.cluster_m) + " CTAs with " + std::to_string(li.smem_bytes) +
                          " bytes of shared memory each");
    return clusters * li.cluster_m;
  }

  Artifact artifact_;
  Config config_;
  DeviceInfo device_;
  const FamilyHost& host_;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;  // the entry, then LaunchInfo::passes
  DeviceLimits limits_;
  bool dependent_launches_ = false;  // PassLaunch::overlaps_previous is honoured
};

// Loaded kernels by (context, kind, config): configs are compared field by field, so the warm
// path neither serialises nor hashes the whole config.
enum class Kind { as_given, resolved, reference };
struct MemoKey {
  CUcontext context;
  Kind kind;
  Config config;
  bool operator==(const MemoKey&) const = default;
};
struct MemoKeyHash {
  std::size_t operator()(const MemoKey& k) const {
    return ConfigHash()(k.config) ^ (std::hash<void*>()(k.context) * 31 + std::size_t(k.kind));
  }
};

cache::MemoryTable<const Kernel, MemoKey, MemoKeyHash>& table() {
  static auto* t = new cache::MemoryTable<const Kernel, MemoKey, MemoKeyHash>();
  return *t;
}

Config for_device(Config c, const DeviceInfo& dev) {
  if (c.arch == "native") c.arch = dev.arch();
  return c;
}

}  // namespace

// Two levels: a config as given (one lookup on the warm path), then its resolved form, so
// configs that differ only in what resolve() fills in share one loaded module.
std::shared_ptr<const Kernel> get_kernel(const Config& config) {
  const DeviceInfo& dev = current_device();
  Config c = for_device(config, dev);
  return table().get_or_create({dev.context, Kind::as_given, c}, [&] {
    check_nvrtc_target(c.arch);
    Config resolved = resolve(c);
    return table().get_or_create({dev.context, Kind::resolved, resolved}, [&] {
      Artifact a = build_artifact(generate(resolved));
      return std::make_shared<const LoadedKernel>(std::move(a), std::move(resolved), dev);
    });
  });
}

std::shared_ptr<const Kernel> get_kernel(const Config& config, int64_t seqlen_k) {
  if (seqlen_k < 1)
    throw ArgumentError("flashjit get_kernel: seqlen_k = " + std::to_string(seqlen_k) + ": must be at least 1");
  return get_kernel(with_seqlen_hint(config, seqlen_k));
}

std::shared_ptr<const Kernel> get_reference_kernel(const Config& config) {
  const DeviceInfo& dev = current_device();
  Config c = for_device(config, dev);
  return table().get_or_create({dev.context, Kind::reference, c}, [&] {
    check_nvrtc_target(c.arch);
    KernelSource src = generate_reference(c);
    Artifact a = build_artifact(src);
    Config problem = c;
    problem.tuning = Tuning{};
    return std::make_shared<const LoadedKernel>(std::move(a), std::move(problem), dev);
  });
}

Artifact build(const Config& config) {
  check_nvrtc_target(config.arch);
  return build_artifact(generate(config));
}

}  // namespace flashjit
