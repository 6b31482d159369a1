// Rebuilding a serialized NNAPI model with the NNAPI C API, compiling it and running it.
#include <cstdlib>
#include <cstring>
#include <string>

#include "mobile_ep_nnapi.h"

namespace mobile_ep_nnapi {
namespace {

constexpr size_t kBlobAlignment = 64;
constexpr const char* kReferenceDevice = "nnapi-reference";

bool Check(int status, const char* call, std::string* error) {
  if (status == ANEURALNETWORKS_NO_ERROR) return true;
  *error = std::string(call) + " failed with NNAPI result code " + std::to_string(status);
  return false;
}

ANeuralNetworksOperandType OperandType(const SerializedOperand& o) {
  ANeuralNetworksOperandType type;
  type.type = o.type;
  type.dimensionCount = static_cast<uint32_t>(o.dims.size());
  type.dimensions = o.dims.empty() ? nullptr : o.dims.data();
  type.scale = o.scale;
  type.zeroPoint = o.zero_point;
  return type;
}

}  // namespace

std::unique_ptr<Partition> Partition::Create(std::shared_ptr<const NnapiApi> api, const void* blob, size_t size,
                                             std::string* error) {
  if (api == nullptr) {
    *error = "no NNAPI functions (NnapiApi::Load failed)";
    return nullptr;
  }
  std::unique_ptr<Partition> partition(new Partition());
  partition->api_ = std::move(api);
  // An aligned copy: constant values are passed to NNAPI in place (the format aligns them to 16 bytes
  // from a 64-byte aligned data area) and must outlive the model.
  size_t rounded = (size + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment;
  void* memory = std::aligned_alloc(kBlobAlignment, rounded == 0 ? kBlobAlignment : rounded);
  if (memory == nullptr) {
    *error = "out of memory copying the serialized model";
    return nullptr;
  }
  std::memcpy(memory, blob, size);
  partition->blob_ = std::unique_ptr<uint8_t, void (*)(void*)>(static_cast<uint8_t*>(memory), std::free);
  partition->size_ = size;
  if (!ParseModel(partition->blob_.get(), size, &partition->model_, error)) return nullptr;
  if (!partition->Build(error) || !partition->Compile(error)) return nullptr;
  return partition;
}

Partition::~Partition() {
  if (compilation_ != nullptr) api_->Compilation_free(compilation_);
  if (nn_model_ != nullptr) api_->Model_free(nn_model_);
}

bool Partition::Build(std::string* error) {
  const NnapiApi& nn = *api_;
  const SerializedModel& m = model_;
  if (m.outputs.empty()) return true;  // nothing to compute (every output is empty)
  if (!Check(nn.Model_create(&nn_model_), "ANeuralNetworksModel_create", error)) return false;
  for (size_t i = 0; i < m.operands.size(); ++i) {
    const SerializedOperand& o = m.operands[i];
    ANeuralNetworksOperandType type = OperandType(o);
    if (!Check(nn.Model_addOperand(nn_model_, &type), "ANeuralNetworksModel_addOperand", error)) return false;
    if (o.per_channel) {
      if (nn.Model_setOperandSymmPerChannelQuantParams == nullptr) {
        *error = "per-channel quantized operands need NNAPI of Android 10 (API 29)";
        return false;
      }
      ANeuralNetworksSymmPerChannelQuantParams params;
      params.channelDim = o.channel_dim;
      params.scaleCount = static_cast<uint32_t>(o.channel_scales.size());
      params.scales = o.channel_scales.data();
      if (!Check(nn.Model_setOperandSymmPerChannelQuantParams(nn_model_, static_cast<int32_t>(i), &params),
                 "ANeuralNetworksModel_setOperandSymmPerChannelQuantParams", error))
        return false;
    }
  }
  for (const SerializedConstant& c : m.constants) {
    // Values up to 128 bytes are copied; larger ones are read from the blob, which lives as long as we do.
    if (!Check(nn.Model_setOperandValue(nn_model_, static_cast<int32_t>(c.operand), m.data + c.offset,
                                        static_cast<size_t>(c.length)),
               "ANeuralNetworksModel_setOperandValue", error))
      return false;
  }
  for (const SerializedOperation& op : m.operations) {
    if (!Check(nn.Model_addOperation(nn_model_, op.type, static_cast<uint32_t>(op.inputs.size()), op.inputs.data(),
                                     static_cast<uint32_t>(op.outputs.size()), op.outputs.data()),
               "ANeuralNetworksModel_addOperation", error))
      return false;
  }
  if (!Check(nn.Model_identifyInputsAndOutputs(nn_model_, static_cast<uint32_t>(m.inputs.size()), m.inputs.data(),
                                               static_cast<uint32_t>(m.outputs.size()), m.outputs.data()),
             "ANeuralNetworksModel_identifyInputsAndOutputs", error))
    return false;
  if (m.relax_fp16()) {
    if (nn.Model_relaxComputationFloat32toFloat16 == nullptr) {
      *error = "relaxed float32 computation needs NNAPI of Android 9 (API 28)";
      return false;
    }
    if (!Check(nn.Model_relaxComputationFloat32toFloat16(nn_model_, true),
               "ANeuralNetworksModel_relaxComputationFloat32toFloat16", error))
      return false;
  }
  return Check(nn.Model_finish(nn_model_), "ANeuralNetworksModel_finish", error);
}

bool Partition::Compile(std::string* error) {
  const NnapiApi& nn = *api_;
  if (nn_model_ == nullptr) return true;
  if (model_.device_policy == 0) {
    devices_.assign(1, "");
    if (!Check(nn.Compilation_create(nn_model_, &compilation_), "ANeuralNetworksCompilation_create", error))
      return false;
  } else {
    // CPU disabled: every device that is not a CPU (nor nnapi-reference); CPU only: nnapi-reference.
    if (nn.getDeviceCount == nullptr || nn.getDevice == nullptr || nn.Device_getName == nullptr ||
        nn.Device_getType == nullptr || nn.Compilation_createForDevices == nullptr) {
      *error = "choosing NNAPI devices (cpu_disabled / cpu_only) needs Android 10 (API 29)";
      return false;
    }
    uint32_t count = 0;
    if (!Check(nn.getDeviceCount(&count), "ANeuralNetworks_getDeviceCount", error)) return false;
    std::vector<const ANeuralNetworksDevice*> chosen;
    for (uint32_t i = 0; i < count; ++i) {
      ANeuralNetworksDevice* device = nullptr;
      const char* name = nullptr;
      int32_t type = 0;
      if (!Check(nn.getDevice(i, &device), "ANeuralNetworks_getDevice", error) ||
          !Check(nn.Device_getName(device, &name), "ANeuralNetworksDevice_getName", error) ||
          !Check(nn.Device_getType(device, &type), "ANeuralNetworksDevice_getType", error))
        return false;
      const bool reference = name != nullptr && std::strcmp(name, kReferenceDevice) == 0;
      const bool cpu = reference || type == ANEURALNETWORKS_DEVICE_CPU;
      if ((model_.device_policy == 1 && !cpu) || (model_.device_policy == 2 && reference)) {
        chosen.push_back(device);
        devices_.emplace_back(name != nullptr ? name : "");
      }
    }
    if (chosen.empty()) {
      *error = model_.device_policy == 1 ? "no NNAPI accelerator on this device (cpu_disabled)"
                                         : "nnapi-reference is not available (cpu_only)";
      return false;
    }
    if (!Check(nn.Compilation_createForDevices(nn_model_, chosen.data(), static_cast<uint32_t>(chosen.size()),
                                               &compilation_),
               "ANeuralNetworksCompilation_createForDevices", error))
      return false;
  }
  if (!Check(nn.Compilation_setPreference(compilation_, model_.preference), "ANeuralNetworksCompilation_setPreference",
             error))
    return false;
  return Check(nn.Compilation_finish(compilation_), "ANeuralNetworksCompilation_finish", error);
}

bool Partition::Run(const std::vector<const void*>& inputs, const std::vector<size_t>& input_sizes,
                    const std::vector<void*>& outputs, const std::vector<size_t>& output_sizes,
                    std::string* error) const {
  const NnapiApi& nn = *api_;
  if (inputs.size() != input_count() || input_sizes.size() != input_count() || outputs.size() != output_count() ||
      output_sizes.size() != output_count()) {
    *error = "Run: expected " + std::to_string(input_count()) + " inputs and " + std::to_string(output_count()) +
             " outputs";
    return false;
  }
  for (size_t i = 0; i < input_count(); ++i) {
    if (input_sizes[i] != input_bytes(i)) {
      *error = "input '" + input_name(i) + "' has " + std::to_string(input_sizes[i]) + " bytes, expected " +
               std::to_string(input_bytes(i));
      return false;
    }
  }
  for (size_t i = 0; i < output_count(); ++i) {
    if (output_sizes[i] != output_bytes(i)) {
      *error = "output '" + output_name(i) + "' has " + std::to_string(output_sizes[i]) + " bytes, expected " +
               std::to_string(output_bytes(i));
      return false;
    }
  }
  if (compilation_ == nullptr) return true;
  ANeuralNetworksExecution* execution = nullptr;
  if (!Check(nn.Execution_create(compilation_, &execution), "ANeuralNetworksExecution_create", error)) return false;
  bool ok = true;
  for (size_t i = 0; ok && i < input_count(); ++i) {
    ok = Check(nn.Execution_setInput(execution, static_cast<int32_t>(i), nullptr, inputs[i], input_sizes[i]),
               "ANeuralNetworksExecution_setInput", error);
  }
  for (size_t i = 0; ok && i < output_count(); ++i) {
    ok = Check(nn.Execution_setOutput(execution, static_cast<int32_t>(i), nullptr, outputs[i], output_sizes[i]),
               "ANeuralNetworksExecution_setOutput", error);
  }
  if (ok) {
    if (nn.Execution_compute != nullptr) {  // API 29: synchronous
      ok = Check(nn.Execution_compute(execution), "ANeuralNetworksExecution_compute", error);
    } else {
      ANeuralNetworksEvent* event = nullptr;
      ok = Check(nn.Execution_startCompute(execution, &event), "ANeuralNetworksExecution_startCompute", error) &&
           Check(nn.Event_wait(event), "ANeuralNetworksEvent_wait", error);
      if (event != nullptr) nn.Event_free(event);
    }
  }
  nn.Execution_free(execution);
  return ok;
}

}  // namespace mobile_ep_nnapi
