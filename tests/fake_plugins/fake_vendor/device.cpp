// A stand-in accelerator on torch's PrivateUse1 slot, for tests: tensors really live on "npu:N" / "musa:N"
// (the Python side renames the slot), their memory comes from the host allocator and every operator runs
// on the cpu through one boxed fallback. Built at test time (build.py), never shipped.
//
// What is native here, as on a real out-of-tree backend: the allocator (counting the bytes each device
// holds), empty/empty_strided, copies between host and device, resize_, set_, views over the same
// storage, a device guard (current device, streams, events), per-device default generators, pinned host
// memory, and hooks. Everything else reaches the cpu kernels: device tensors are handed over as cpu
// tensors over the same memory (no copy), results come back on the device, in-place results as the very
// tensors that were passed in, views as views of the device storage. Where aten would decompose an op for
// a device that lacks its kernel and torch_npu has the kernel (the fused LSTM cell, SiLU's backward, fused
// attention), the stand-in has it too, so that it computes and allocates as a vendor's device does.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>
#include <torch/version.h>

#include <chrono>
#include <mutex>
#include <unordered_set>

namespace {

constexpr c10::DeviceType kDevice = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 16;

int g_device_count = 2;  // set from Python, from the visible-devices variable
thread_local c10::DeviceIndex g_current = 0;

// Bytes held per device, as a caching allocator reports them (nothing is cached: reserved == allocated).
struct Stats {
  int64_t allocated = 0;
  int64_t peak = 0;
  int64_t allocations = 0;
  int64_t frees = 0;
};
std::mutex g_stats_mutex;
Stats g_stats[kMaxDevices];

c10::DeviceIndex current_device() { return g_current; }

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < g_device_count, "invalid device ordinal ", static_cast<int>(index),
              ": this process sees ", g_device_count, " device(s)");
}

struct Block {
  void* data;
  c10::DeviceIndex device;
  size_t nbytes;
};

void free_block(void* context) {
  auto* block = static_cast<Block*>(context);
  {
    std::lock_guard<std::mutex> lock(g_stats_mutex);
    g_stats[block->device].allocated -= static_cast<int64_t>(block->nbytes);
    g_stats[block->device].frees += 1;
  }
  c10::free_cpu(block->data);
  delete block;
}

struct DeviceAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = current_device();
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    {
      std::lock_guard<std::mutex> lock(g_stats_mutex);
      Stats& stats = g_stats[device];
      stats.allocated += static_cast<int64_t>(nbytes);
      stats.peak = std::max(stats.peak, stats.allocated);
      stats.allocations += 1;
    }
    return {data, new Block{data, device, nbytes}, &free_block, c10::Device(kDevice, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { default_copy_data(dest, src, count); }
};
DeviceAllocator g_allocator;
REGISTER_ALLOCATOR(kDevice, &g_allocator);

// Pinned ("page-locked") host memory: host tensors whose pointers the device remembers.
std::mutex g_pinned_mutex;
std::unordered_set<const void*> g_pinned;

void free_pinned(void* data) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(data);
  }
  c10::free_cpu(data);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes ? c10::alloc_cpu(nbytes) : nullptr;
    if (data) {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned.insert(data);
    }
    return {data, data, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const final { default_copy_data(dest, src, count); }
};
PinnedAllocator g_pinned_allocator;

// The device's work is synchronous: a stream is always done, an event is a timestamp.
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct DeviceGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kDevice; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device old = getDevice();
    if (device.index() != old.index()) setDevice(device);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kDevice, g_current); }
  void setDevice(c10::Device device) const override {
    if (device.index() < 0) return;
    check_index(device.index());
    g_current = device.index();
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0) g_current = device.index();
  }
  c10::Stream getStream(c10::Device device) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, device); }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool high_priority) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }
  c10::Stream exchangeStream(c10::Stream stream) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(g_device_count); }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    if (*event == nullptr) *event = new double(0.0);
    *static_cast<double*>(*event) = now_ms();
  }
  void block(void* event, const c10::Stream& stream) const override {}
  bool queryEvent(void* event) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex device_index) const noexcept override {
    delete static_cast<double*>(event);
  }
  bool queryStream(const c10::Stream& stream) const override { return true; }
  void synchronizeStream(const c10::Stream& stream) const override {}
  void synchronizeEvent(void* event) const override {}
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {}
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device_index) const override {
    TORCH_CHECK(start && end, "both events must be recorded before measuring elapsed time");
    return *static_cast<double*>(end) - *static_cast<double*>(start);
  }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, DeviceGuard);

// One default generator per device: random kernels that run on the device draw from it.
std::mutex g_generators_mutex;
std::vector<at::Generator> g_generators;

const at::Generator& default_generator(c10::DeviceIndex index) {
  std::lock_guard<std::mutex> lock(g_generators_mutex);
  if (g_generators.empty()) {
    for (int i = 0; i < kMaxDevices; ++i) {
      g_generators.push_back(at::make_generator<at::CPUGeneratorImpl>(c10::detail::getNonDeterministicRandom()));
    }
  }
  return g_generators.at(index < 0 ? current_device() : index);
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  c10::DeviceGuard guard(storage.device());
  at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), nbytes);
}

struct Hooks final : at::PrivateUse1HooksInterface {
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 7  // the accelerator hooks ask these from torch 2.7
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return g_device_count > 0; }
#endif
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(g_device_count); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    check_index(device);
    g_current = device;
  }
  c10::DeviceIndex getCurrentDevice() const override { return g_current; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = g_current;
    setCurrentDevice(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<at::CPUGeneratorImpl>(c10::detail::getNonDeterministicRandom());
  }
  c10::Device getDeviceFromPtr(void* data) const override { return c10::Device(kDevice, current_device()); }
  bool isPinnedPtr(const void* data) const override {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    return g_pinned.count(data) > 0;
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, newsize);
  }
};

bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  return true;
}();

bool on_device(const at::Tensor& tensor) { return tensor.defined() && tensor.device().type() == kDevice; }

// A cpu tensor over a device tensor's memory: same storage bytes, sizes, strides and offset.
at::Tensor host_view(const at::Tensor& tensor) {
  if (!on_device(tensor)) return tensor;
  const c10::Storage& storage = tensor.storage();
  auto options = tensor.options().device(c10::DeviceType::CPU);
  if (storage.data() == nullptr) return at::empty_strided(tensor.sizes(), tensor.strides(), options);
  return at::for_blob(storage.mutable_data(), tensor.sizes())
      .strides(tensor.strides())
      .storage_offset(tensor.storage_offset())
      .context(new c10::Storage(storage), [](void* context) { delete static_cast<c10::Storage*>(context); })
      .options(options)
      .make_tensor();
}

at::Tensor empty_on_device(at::IntArrayRef size, std::optional<at::IntArrayRef> stride, at::ScalarType dtype,
                           std::optional<c10::Device> device, std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_device();
  check_index(index);
  c10::DeviceGuard guard(c10::Device(kDevice, index));
  constexpr c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  if (stride) return at::detail::empty_strided_generic(size, *stride, &g_allocator, keys, dtype);
  return at::detail::empty_generic(size, &g_allocator, keys, dtype, memory_format);
}

at::Tensor empty_memory_format(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  return empty_on_device(size, std::nullopt, c10::dtype_or_default(dtype), device, memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  return empty_on_device(size, stride, c10::dtype_or_default(dtype), device, std::nullopt);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  host_view(dst).copy_(host_view(self));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), size, std::nullopt);
  if (memory_format && *memory_format != at::MemoryFormat::Preserve) {
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  c10::DeviceGuard guard(source.device());
  return at::native::set_storage_cpu_(self, std::move(source), storage_offset, size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &g_allocator, true);
  return set_storage(self, std::move(storage), 0, {0}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

void record_stream(at::Tensor& self, c10::Stream stream) {}

// As torch_npu answers it: host and device tensors can take each other's place, so `module.npu()` moves
// each Parameter in place (`param.data = …`) and tied weights stay tied. Core torch lists only its own
// backends as dense here; without this, moving a model to the device unties its embeddings.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](c10::DispatchKeySet keys) {
    return keys.has(c10::DispatchKey::CPU) || keys.has(c10::DispatchKey::PrivateUse1);
  };
  return self.key_set() == from.key_set() || (dense(self.key_set()) && dense(from.key_set()));
}

// The fused LSTM cell: an RNN on a PrivateUse1 device steps through it (aten's LSTMCell picks it for
// cuda, xpu and privateuse1), torch_npu has it, and the cpu has no kernel for it. Workspace: the
// activated gates [i, f, g, o].
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias && hidden_bias->defined()) gates = gates + *hidden_bias;
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  at::Tensor tanh_cy = cy.tanh();
  at::Tensor d_hy = grad_hy && grad_hy->defined() ? *grad_hy : at::zeros_like(cy);
  at::Tensor d_cy = d_hy * o * (1 - tanh_cy * tanh_cy);
  if (grad_cy && grad_cy->defined()) d_cy = d_cy + *grad_cy;
  at::Tensor grad_gates = at::cat(
      {d_cy * g * i * (1 - i), d_cy * cx * f * (1 - f), d_cy * i * (1 - g * g), d_hy * tanh_cy * o * (1 - o)}, 1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, d_cy * f, grad_bias};
}

// Fused attention: torch asks a PrivateUse1 backend which SDPA kernel to run (`_fused_sdp_choice_stub`) and
// runs the unfused math one when it has no answer. torch_npu answers with its fused kernel; the stand-in
// answers what the cpu would (its flash kernel, whose forward and backward then run through the fallback),
// so that attention holds on the device what a fused kernel holds, not the math path's scores.
int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  std::optional<at::Tensor> mask;
  if (attn_mask && attn_mask->defined()) mask = host_view(*attn_mask);
  // The cpu's own function, not the op: a dispatched op would show in a recording of the step as one call
  // more than the cpu makes.
  return at::native::_fused_sdp_choice_cpp(host_view(query), host_view(key), host_view(value), mask, dropout_p,
                                           is_causal, scale, enable_gqa);
}

}  // namespace

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &fused_sdp_choice)
}  // namespace at::native

namespace {

// ---- the boxed fallback: every other operator runs its cpu kernel over the same memory ----

struct DeviceArgs {
  std::optional<c10::Device> device;
  std::vector<at::Tensor> inputs;  // device tensors passed in, for aliasing results back onto them
};

c10::IValue to_host(const c10::IValue& value, DeviceArgs& seen) {
  if (value.isTensor()) {
    const at::Tensor& tensor = value.toTensor();
    if (!on_device(tensor)) return value;
    if (!seen.device) seen.device = tensor.device();
    seen.inputs.push_back(tensor);
    return host_view(tensor);
  }
  if (value.isTensorList()) {
    auto list = value.toTensorList();
    c10::List<at::Tensor> host;
    for (const at::Tensor& tensor : list) host.push_back(to_host(tensor, seen).toTensor());
    return host;
  }
  if (value.isList()) {
    auto list = value.toList();
    if (list.size() == 0 || !list.get(0).isTensor() && !list.get(0).isNone()) return value;
    c10::List<std::optional<at::Tensor>> host;
    for (const c10::IValue& each : list) {
      host.push_back(each.isNone() ? std::optional<at::Tensor>() : to_host(each, seen).toTensor());
    }
    return host;
  }
  if (value.isDevice() && value.toDevice().type() == kDevice) {
    if (!seen.device) seen.device = value.toDevice();
    return c10::Device(c10::DeviceType::CPU);
  }
  return value;
}

bool is_optional_generator(const c10::Argument& argument) {
  const auto& type = argument.type();
  return type->kind() == c10::TypeKind::OptionalType &&
         type->containedType(0)->kind() == c10::TypeKind::GeneratorType;
}

// A cpu result back on the device: a view of a device input when it shares its memory, else a copy.
at::Tensor to_device(const at::Tensor& result, const DeviceArgs& seen, c10::Device device) {
  if (!result.defined() || result.device().type() != c10::DeviceType::CPU) return result;
  const char* data = static_cast<const char*>(result.storage().data());
  for (const at::Tensor& input : seen.inputs) {
    const c10::Storage& storage = input.storage();
    const char* base = static_cast<const char*>(storage.data());
    if (data == nullptr || base == nullptr || data < base || data >= base + storage.nbytes()) continue;
    int64_t offset_bytes = (data - base) + result.storage_offset() * result.itemsize();
    auto view = at::detail::make_tensor<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(storage),
                                                         input.key_set(), result.dtype());
    view.unsafeGetTensorImpl()->set_sizes_and_strides(result.sizes(), result.strides(),
                                                      offset_bytes / result.itemsize());
    return view;
  }
  at::Tensor copy = empty_on_device(result.sizes(), result.strides(), result.scalar_type(), device, std::nullopt);
  host_view(copy).copy_(result);
  return copy;
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const size_t first = stack->size() - arguments.size();
  std::vector<c10::IValue> originals(stack->begin() + first, stack->end());

  DeviceArgs seen;
  std::vector<size_t> generators;
  std::vector<std::pair<size_t, at::Tensor>> written;  // device tensors the kernel writes, and their host side
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& value = (*stack)[first + i];
    if (value.isNone() && is_optional_generator(arguments[i])) {
      generators.push_back(first + i);
      continue;
    }
    value = to_host(value, seen);
    const c10::AliasInfo* alias = arguments[i].alias_info();
    if (alias && alias->isWrite() && value.isTensor() && on_device(originals[i].toTensor())) {
      // An out= tensor may be resized by the kernel, which memory borrowed from the device cannot be:
      // the kernel gets a host copy, and the result is brought back below.
      if (arguments[i].is_out()) value = value.toTensor().clone(at::MemoryFormat::Preserve);
      written.emplace_back(i, value.toTensor());
    }
  }
  c10::Device device = seen.device.value_or(c10::Device(kDevice, current_device()));
  if (!device.has_index()) device = c10::Device(kDevice, current_device());
  for (size_t position : generators) (*stack)[position] = default_generator(device.index());

  op.callBoxed(stack);

  // Bring back what the kernel wrote to a host copy or to memory it reallocated.
  for (auto& [i, host] : written) {
    const at::Tensor& original = originals[i].toTensor();
    if (host.data_ptr() == original.data_ptr() && host.sizes() == original.sizes() &&
        host.strides() == original.strides()) {
      continue;
    }
    original.resize_(host.sizes());
    if (host.strides() != original.strides()) original.as_strided_(host.sizes(), host.strides());
    host_view(original).copy_(host);
  }

  const auto& returns = schema.returns();
  const size_t first_return = stack->size() - returns.size();
  for (size_t r = 0; r < returns.size(); ++r) {
    c10::IValue& value = (*stack)[first_return + r];
    const c10::AliasInfo* alias = returns[r].alias_info();
    if (alias && alias->isWrite()) {
      // In-place and out= results are the tensors the caller passed, not new ones.
      for (size_t i = 0; i < arguments.size(); ++i) {
        const c10::AliasInfo* argument_alias = arguments[i].alias_info();
        if (argument_alias && argument_alias->beforeSets() == alias->beforeSets()) {
          value = originals[i];
          break;
        }
      }
      continue;
    }
    if (value.isTensor()) {
      value = to_device(value.toTensor(), seen, device);
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> results;
      for (const at::Tensor& tensor : value.toTensorList()) results.push_back(to_device(tensor, seen, device));
      value = results;
    }
  }
}

// ---- what the Python side of the plugin asks for ----

void set_device_count(int64_t count) {
  TORCH_CHECK(count >= 0 && count <= kMaxDevices, "device count must be within [0, ", kMaxDevices, "]");
  g_device_count = static_cast<int>(count);
}

std::vector<int64_t> memory_stats(int64_t device) {
  check_index(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  const Stats& stats = g_stats[device];
  return {stats.allocated, stats.peak, stats.allocations, stats.frees};
}

void reset_peak(int64_t device) {
  check_index(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(g_stats_mutex);
  g_stats[device].peak = g_stats[device].allocated;
}

at::Tensor generator_state(int64_t device) {
  check_index(static_cast<c10::DeviceIndex>(device));
  at::Generator generator = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_generator_state(int64_t device, const at::Tensor& state) {
  check_index(static_cast<c10::DeviceIndex>(device));
  at::Generator generator = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

void seed_generator(int64_t device, int64_t seed) {
  check_index(static_cast<c10::DeviceIndex>(device));
  at::Generator generator = default_generator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(static_cast<uint64_t>(seed));
}

int64_t generator_seed(int64_t device) {
  check_index(static_cast<c10::DeviceIndex>(device));
  return static_cast<int64_t>(default_generator(static_cast<c10::DeviceIndex>(device)).current_seed());
}

int64_t get_current_device() { return current_device(); }

void set_current_device(int64_t device) {
  check_index(static_cast<c10::DeviceIndex>(device));
  g_current = static_cast<c10::DeviceIndex>(device);
}

}  // namespace

TORCH_LIBRARY(fake_device, m) {
  m.def("set_device_count(int count) -> ()", &set_device_count);
  m.def("current_device() -> int", &get_current_device);
  m.def("set_device(int device) -> ()", &set_current_device);
  m.def("memory_stats(int device) -> int[]", &memory_stats);
  m.def("reset_peak(int device) -> ()", &reset_peak);
  m.def("get_rng_state(int device) -> Tensor", &generator_state);
  m.def("set_rng_state(int device, Tensor state) -> ()", &set_generator_state);
  m.def("manual_seed(int device, int seed) -> ()", &seed_generator);
  m.def("initial_seed(int device) -> int", &generator_seed);
  m.def("host_view(Tensor(a) self) -> Tensor(a)");
  m.impl("host_view", c10::DispatchKey::PrivateUse1, TORCH_FN(host_view));
  m.impl("host_view", c10::DispatchKey::CPU, TORCH_FN(host_view));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("record_stream", TORCH_FN(record_stream));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  // Kernels torch_npu has where aten falls back to a decomposition for a device without them (SiLU's and
  // Mish's backward: five temporaries instead of one result); the cpu's kernels, through the fallback.
  m.impl("silu_backward", torch::CppFunction::makeFromBoxedFunction<&fallback>());
  m.impl("mish_backward", torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

// Autocast: the vendor registers its own op lists; these are CUDA's (lower precision for matmuls and
// convolutions, fp32 for reductions and norms, promotion for mixed inputs).
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// Inside at::autocast, where the lists' unqualified types (Tensor, Scalar, …) resolve.
namespace at::autocast {
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define ADD_NS(RAW_OP) at::RAW_OP  // as autocast_mode.cpp defines it for these lists
#define LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(LOWER_PRECISION)
  AT_FORALL_FP32(FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(PROMOTE)
}
}  // namespace at::autocast
