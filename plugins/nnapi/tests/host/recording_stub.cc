// A recording stub of the NNAPI C API, for tests on a machine without Android: every call the adapter
// makes is appended, one line each, to the file named by $MEP_NNAPI_RECORD, and checked for basic
// validity (indices in range, calls in order) as NNAPI would.  It computes nothing: outputs are zeroed.
//
// Built as a shared library and given to mobile_ep_nnapi::NnapiApi::Load in place of
// libneuralnetworks.so.  It reports three devices: stub-npu (accelerator), stub-gpu (GPU) and
// nnapi-reference (CPU).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mobile_ep_nnapi_decls.h"

struct ANeuralNetworksModel {
  uint32_t operands = 0;
  bool finished = false;
};
struct ANeuralNetworksCompilation {
  bool finished = false;
};
struct ANeuralNetworksExecution {
  int unused = 0;
};
struct ANeuralNetworksEvent {
  int unused = 0;
};
struct ANeuralNetworksDevice {
  const char* name;
  int32_t type;
};

namespace {

ANeuralNetworksDevice kDevices[] = {
    {"stub-npu", ANEURALNETWORKS_DEVICE_ACCELERATOR},
    {"stub-gpu", ANEURALNETWORKS_DEVICE_GPU},
    {"nnapi-reference", ANEURALNETWORKS_DEVICE_CPU},
};

void Record(const std::string& line) {
  const char* path = std::getenv("MEP_NNAPI_RECORD");
  if (path == nullptr) return;
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) return;
  std::fputs(line.c_str(), f);
  std::fputc('\n', f);
  std::fclose(f);
}

std::string Hex(const void* data, size_t length) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < length; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

std::string FloatBits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  char text[16];
  std::snprintf(text, sizeof text, "%08" PRIx32, bits);
  return text;
}

std::string List(uint32_t count, const uint32_t* values) {
  std::string out = std::to_string(count);
  for (uint32_t i = 0; i < count; ++i) out += " " + std::to_string(values[i]);
  return out;
}

}  // namespace

extern "C" {

int ANeuralNetworksModel_create(ANeuralNetworksModel** model) {
  if (model == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  *model = new ANeuralNetworksModel();
  Record("model_create");
  return ANEURALNETWORKS_NO_ERROR;
}

void ANeuralNetworksModel_free(ANeuralNetworksModel* model) {
  Record("model_free");
  delete model;
}

int ANeuralNetworksModel_finish(ANeuralNetworksModel* model) {
  if (model == nullptr || model->finished) return ANEURALNETWORKS_BAD_STATE;
  model->finished = true;
  Record("model_finish");
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_addOperand(ANeuralNetworksModel* model, const ANeuralNetworksOperandType* type) {
  if (model == nullptr || type == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  if (model->finished) return ANEURALNETWORKS_BAD_STATE;
  if (type->dimensionCount > 0 && type->dimensions == nullptr) return ANEURALNETWORKS_BAD_DATA;
  Record("operand " + std::to_string(type->type) + " " + List(type->dimensionCount, type->dimensions) + " " +
         FloatBits(type->scale) + " " + std::to_string(type->zeroPoint));
  ++model->operands;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_setOperandValue(ANeuralNetworksModel* model, int32_t index, const void* buffer,
                                         size_t length) {
  if (model == nullptr || buffer == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  if (index < 0 || static_cast<uint32_t>(index) >= model->operands) return ANEURALNETWORKS_BAD_DATA;
  if (length > ANEURALNETWORKS_MAX_SIZE_OF_IMMEDIATELY_COPIED_VALUES && reinterpret_cast<uintptr_t>(buffer) % 4 != 0)
    return ANEURALNETWORKS_BAD_DATA;  // values read in place must be aligned
  Record("value " + std::to_string(index) + " " + std::to_string(length) + " " + Hex(buffer, length));
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_setOperandSymmPerChannelQuantParams(
    ANeuralNetworksModel* model, int32_t index, const ANeuralNetworksSymmPerChannelQuantParams* channelQuant) {
  if (model == nullptr || channelQuant == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  if (index < 0 || static_cast<uint32_t>(index) >= model->operands) return ANEURALNETWORKS_BAD_DATA;
  std::string line = "perchannel " + std::to_string(index) + " " + std::to_string(channelQuant->channelDim) + " " +
                     std::to_string(channelQuant->scaleCount);
  for (uint32_t i = 0; i < channelQuant->scaleCount; ++i) line += " " + FloatBits(channelQuant->scales[i]);
  Record(line);
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_addOperation(ANeuralNetworksModel* model, ANeuralNetworksOperationType type,
                                      uint32_t inputCount, const uint32_t* inputs, uint32_t outputCount,
                                      const uint32_t* outputs) {
  if (model == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  for (uint32_t i = 0; i < inputCount; ++i)
    if (inputs[i] >= model->operands) return ANEURALNETWORKS_BAD_DATA;
  for (uint32_t i = 0; i < outputCount; ++i)
    if (outputs[i] >= model->operands) return ANEURALNETWORKS_BAD_DATA;
  Record("operation " + std::to_string(type) + " " + List(inputCount, inputs) + " " + List(outputCount, outputs));
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_identifyInputsAndOutputs(ANeuralNetworksModel* model, uint32_t inputCount,
                                                  const uint32_t* inputs, uint32_t outputCount,
                                                  const uint32_t* outputs) {
  if (model == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  Record("io " + List(inputCount, inputs) + " " + List(outputCount, outputs));
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksModel_relaxComputationFloat32toFloat16(ANeuralNetworksModel* model, bool allow) {
  if (model == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  Record(std::string("relax ") + (allow ? "1" : "0"));
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworks_getDeviceCount(uint32_t* numDevices) {
  *numDevices = sizeof kDevices / sizeof kDevices[0];
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworks_getDevice(uint32_t devIndex, ANeuralNetworksDevice** device) {
  if (devIndex >= sizeof kDevices / sizeof kDevices[0]) return ANEURALNETWORKS_BAD_DATA;
  *device = &kDevices[devIndex];
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksDevice_getName(const ANeuralNetworksDevice* device, const char** name) {
  *name = device->name;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksDevice_getType(const ANeuralNetworksDevice* device, int32_t* type) {
  *type = device->type;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksDevice_getFeatureLevel(const ANeuralNetworksDevice*, int64_t* featureLevel) {
  *featureLevel = 31;
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_create(ANeuralNetworksModel* model, ANeuralNetworksCompilation** compilation) {
  if (model == nullptr || !model->finished) return ANEURALNETWORKS_BAD_STATE;
  *compilation = new ANeuralNetworksCompilation();
  Record("compilation_create");
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_createForDevices(ANeuralNetworksModel* model,
                                                const ANeuralNetworksDevice* const* devices, uint32_t numDevices,
                                                ANeuralNetworksCompilation** compilation) {
  if (model == nullptr || !model->finished) return ANEURALNETWORKS_BAD_STATE;
  if (numDevices == 0) return ANEURALNETWORKS_BAD_DATA;
  std::string line = "compilation_create_for_devices " + std::to_string(numDevices);
  for (uint32_t i = 0; i < numDevices; ++i) line += std::string(" ") + devices[i]->name;
  Record(line);
  *compilation = new ANeuralNetworksCompilation();
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_setPreference(ANeuralNetworksCompilation* compilation, int32_t preference) {
  if (compilation == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  if (preference < 0 || preference > 2) return ANEURALNETWORKS_BAD_DATA;
  Record("preference " + std::to_string(preference));
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksCompilation_finish(ANeuralNetworksCompilation* compilation) {
  if (compilation == nullptr || compilation->finished) return ANEURALNETWORKS_BAD_STATE;
  compilation->finished = true;
  Record("compilation_finish");
  return ANEURALNETWORKS_NO_ERROR;
}

void ANeuralNetworksCompilation_free(ANeuralNetworksCompilation* compilation) {
  Record("compilation_free");
  delete compilation;
}

int ANeuralNetworksExecution_create(ANeuralNetworksCompilation* compilation, ANeuralNetworksExecution** execution) {
  if (compilation == nullptr || !compilation->finished) return ANEURALNETWORKS_BAD_STATE;
  *execution = new ANeuralNetworksExecution();
  Record("execution_create");
  return ANEURALNETWORKS_NO_ERROR;
}

void ANeuralNetworksExecution_free(ANeuralNetworksExecution* execution) {
  Record("execution_free");
  delete execution;
}

int ANeuralNetworksExecution_setInput(ANeuralNetworksExecution*, int32_t index, const ANeuralNetworksOperandType*,
                                      const void* buffer, size_t length) {
  if (buffer == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  Record("input " + std::to_string(index) + " " + std::to_string(length));
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksExecution_setOutput(ANeuralNetworksExecution*, int32_t index, const ANeuralNetworksOperandType*,
                                       void* buffer, size_t length) {
  if (buffer == nullptr) return ANEURALNETWORKS_UNEXPECTED_NULL;
  std::memset(buffer, 0, length);
  Record("output " + std::to_string(index) + " " + std::to_string(length));
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksExecution_compute(ANeuralNetworksExecution*) {
  Record("compute");
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksExecution_startCompute(ANeuralNetworksExecution*, ANeuralNetworksEvent** event) {
  *event = new ANeuralNetworksEvent();
  Record("start_compute");
  return ANEURALNETWORKS_NO_ERROR;
}

int ANeuralNetworksEvent_wait(ANeuralNetworksEvent*) { return ANEURALNETWORKS_NO_ERROR; }

void ANeuralNetworksEvent_free(ANeuralNetworksEvent* event) { delete event; }

}  // extern "C"
