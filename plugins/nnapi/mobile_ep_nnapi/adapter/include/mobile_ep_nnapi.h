// mobile_ep_nnapi.h -- run a partition compiled by mobile-ep (`mobile-ep convert --ep nnapi --compile`)
// with the Android NNAPI C API.
//
//   std::string error;
//   auto api = mobile_ep_nnapi::NnapiApi::Load(nullptr, &error);   // dlopen("libneuralnetworks.so")
//   auto partition = mobile_ep_nnapi::Partition::Create(api, blob.data(), blob.size(), &error);
//   partition->Run({input.data()}, {input.size()}, {output.data()}, {output.size()}, &error);
//
// The blob is a serialized NNAPI model (plugins/nnapi/docs/format.md): a partition file of the
// `<model>.nnapi.compiled/` bundle, or the payload of an EPContext node.  Partition::Create checks it
// (truncated or out-of-range data is refused), rebuilds it with ANeuralNetworksModel_*, compiles it with
// the execution preference and device policy it records (CPU disabled: every device but the CPU ones,
// via createForDevices; CPU only: nnapi-reference) and keeps the compilation for repeated Run calls.
// Inputs and outputs are in the serialized model's order, as raw little-endian buffers of the exact
// byte size (input_bytes / output_bytes), in ONNX layout (NCHW): the NHWC transposes are inside the
// model.
#ifndef MOBILE_EP_NNAPI_H
#define MOBILE_EP_NNAPI_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#if defined(__ANDROID__) && !defined(MOBILE_EP_NNAPI_OWN_HEADER)
#include <android/NeuralNetworks.h>
#else
#include "mobile_ep_nnapi_decls.h"
#endif

namespace mobile_ep_nnapi {

// ---------------------------------------------------------------------------------------------------
// The serialized model (format version 1), parsed.
// ---------------------------------------------------------------------------------------------------
struct SerializedOperand {
  int32_t type = 0;
  std::vector<uint32_t> dims;
  float scale = 0.0f;
  int32_t zero_point = 0;
  bool per_channel = false;
  uint32_t channel_dim = 0;
  std::vector<float> channel_scales;
};

struct SerializedConstant {
  uint32_t operand = 0;
  uint64_t offset = 0;  // from the start of the data area
  uint64_t length = 0;
};

struct SerializedOperation {
  int32_t type = 0;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
};

struct SerializedModel {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint32_t flags = 0;  // bit 0: relax float32 to float16
  uint32_t feature_level = 0;
  int32_t preference = 0;      // ANEURALNETWORKS_PREFER_*
  uint32_t device_policy = 0;  // 0 any, 1 CPU disabled, 2 CPU only
  std::vector<SerializedOperand> operands;
  std::vector<SerializedConstant> constants;
  std::vector<SerializedOperation> operations;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
  const uint8_t* data = nullptr;  // the data area, inside the parsed blob
  uint64_t data_size = 0;

  bool relax_fp16() const { return (flags & 1u) != 0; }
};

// Parses *blob* (which must outlive *out*: constant values point into it).  Returns false and sets
// *error* for a truncated, inconsistent or out-of-range model.
bool ParseModel(const uint8_t* blob, size_t size, SerializedModel* out, std::string* error);

// Bytes of one value of an operand (0 for an unknown type).
size_t OperandBytes(const SerializedOperand& operand);

// ---------------------------------------------------------------------------------------------------
// The NNAPI functions, resolved at run time so that one build works from Android 8.1 (API 27) on:
// the functions of later API levels are null where the device lacks them.
// ---------------------------------------------------------------------------------------------------
struct NnapiApi {
  decltype(&ANeuralNetworksModel_create) Model_create = nullptr;
  decltype(&ANeuralNetworksModel_free) Model_free = nullptr;
  decltype(&ANeuralNetworksModel_finish) Model_finish = nullptr;
  decltype(&ANeuralNetworksModel_addOperand) Model_addOperand = nullptr;
  decltype(&ANeuralNetworksModel_setOperandValue) Model_setOperandValue = nullptr;
  decltype(&ANeuralNetworksModel_setOperandSymmPerChannelQuantParams) Model_setOperandSymmPerChannelQuantParams =
      nullptr;
  decltype(&ANeuralNetworksModel_addOperation) Model_addOperation = nullptr;
  decltype(&ANeuralNetworksModel_identifyInputsAndOutputs) Model_identifyInputsAndOutputs = nullptr;
  decltype(&ANeuralNetworksModel_relaxComputationFloat32toFloat16) Model_relaxComputationFloat32toFloat16 = nullptr;
  decltype(&ANeuralNetworks_getDeviceCount) getDeviceCount = nullptr;
  decltype(&ANeuralNetworks_getDevice) getDevice = nullptr;
  decltype(&ANeuralNetworksDevice_getName) Device_getName = nullptr;
  decltype(&ANeuralNetworksDevice_getType) Device_getType = nullptr;
  decltype(&ANeuralNetworksDevice_getFeatureLevel) Device_getFeatureLevel = nullptr;
  decltype(&ANeuralNetworksCompilation_create) Compilation_create = nullptr;
  decltype(&ANeuralNetworksCompilation_createForDevices) Compilation_createForDevices = nullptr;
  decltype(&ANeuralNetworksCompilation_setPreference) Compilation_setPreference = nullptr;
  decltype(&ANeuralNetworksCompilation_finish) Compilation_finish = nullptr;
  decltype(&ANeuralNetworksCompilation_free) Compilation_free = nullptr;
  decltype(&ANeuralNetworksExecution_create) Execution_create = nullptr;
  decltype(&ANeuralNetworksExecution_free) Execution_free = nullptr;
  decltype(&ANeuralNetworksExecution_setInput) Execution_setInput = nullptr;
  decltype(&ANeuralNetworksExecution_setOutput) Execution_setOutput = nullptr;
  decltype(&ANeuralNetworksExecution_compute) Execution_compute = nullptr;
  decltype(&ANeuralNetworksExecution_startCompute) Execution_startCompute = nullptr;
  decltype(&ANeuralNetworksEvent_wait) Event_wait = nullptr;
  decltype(&ANeuralNetworksEvent_free) Event_free = nullptr;

  // dlopen()s *library* (nullptr: "libneuralnetworks.so") and resolves the functions.  Returns nullptr
  // and sets *error* when the library or an API-27 function is missing.  The library stays loaded.
  static std::shared_ptr<const NnapiApi> Load(const char* library, std::string* error);
};

// ---------------------------------------------------------------------------------------------------
// One compiled partition, ready to run.
// ---------------------------------------------------------------------------------------------------
class Partition {
 public:
  static std::unique_ptr<Partition> Create(std::shared_ptr<const NnapiApi> api, const void* blob, size_t size,
                                           std::string* error);
  ~Partition();
  Partition(const Partition&) = delete;
  Partition& operator=(const Partition&) = delete;

  const SerializedModel& model() const { return model_; }
  size_t input_count() const { return model_.inputs.size(); }
  size_t output_count() const { return model_.outputs.size(); }
  const std::string& input_name(size_t i) const { return model_.input_names[i]; }
  const std::string& output_name(size_t i) const { return model_.output_names[i]; }
  size_t input_bytes(size_t i) const { return OperandBytes(model_.operands[model_.inputs[i]]); }
  size_t output_bytes(size_t i) const { return OperandBytes(model_.operands[model_.outputs[i]]); }
  // The devices the compilation was made for ("" entries: NNAPI's own choice).
  const std::vector<std::string>& devices() const { return devices_; }

  // One inference.  Buffers are in model input/output order with exactly input_bytes/output_bytes.
  bool Run(const std::vector<const void*>& inputs, const std::vector<size_t>& input_sizes,
           const std::vector<void*>& outputs, const std::vector<size_t>& output_sizes, std::string* error) const;

 private:
  Partition() = default;
  bool Build(std::string* error);
  bool Compile(std::string* error);

  std::shared_ptr<const NnapiApi> api_;
  std::unique_ptr<uint8_t, void (*)(void*)> blob_{nullptr, nullptr};  // 64-byte aligned copy
  size_t size_ = 0;
  SerializedModel model_;
  ANeuralNetworksModel* nn_model_ = nullptr;
  ANeuralNetworksCompilation* compilation_ = nullptr;
  std::vector<std::string> devices_;
};

}  // namespace mobile_ep_nnapi

#endif  // MOBILE_EP_NNAPI_H
