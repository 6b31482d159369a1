// Resolving the NNAPI functions at run time (dlopen / dlsym), so that one library serves every Android
// version from 8.1 (API 27) on: functions of later API levels stay null where the device lacks them.
#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "mobile_ep_nnapi.h"

namespace mobile_ep_nnapi {

std::shared_ptr<const NnapiApi> NnapiApi::Load(const char* library, std::string* error) {
  const char* path = library != nullptr ? library : "libneuralnetworks.so";
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    *error = std::string("cannot load ") + path + ": " + (reason != nullptr ? reason : "unknown error");
    return nullptr;
  }
  auto api = std::make_shared<NnapiApi>();
  bool missing = false;
  std::string missing_names;
  auto resolve = [&](auto& slot, const char* name, bool required) {
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
    if (slot == nullptr && required) {
      missing = true;
      missing_names += std::string(missing_names.empty() ? "" : ", ") + name;
    }
  };
  // API 27
  resolve(api->Model_create, "ANeuralNetworksModel_create", true);
  resolve(api->Model_free, "ANeuralNetworksModel_free", true);
  resolve(api->Model_finish, "ANeuralNetworksModel_finish", true);
  resolve(api->Model_addOperand, "ANeuralNetworksModel_addOperand", true);
  resolve(api->Model_setOperandValue, "ANeuralNetworksModel_setOperandValue", true);
  resolve(api->Model_addOperation, "ANeuralNetworksModel_addOperation", true);
  resolve(api->Model_identifyInputsAndOutputs, "ANeuralNetworksModel_identifyInputsAndOutputs", true);
  resolve(api->Compilation_create, "ANeuralNetworksCompilation_create", true);
  resolve(api->Compilation_setPreference, "ANeuralNetworksCompilation_setPreference", true);
  resolve(api->Compilation_finish, "ANeuralNetworksCompilation_finish", true);
  resolve(api->Compilation_free, "ANeuralNetworksCompilation_free", true);
  resolve(api->Execution_create, "ANeuralNetworksExecution_create", true);
  resolve(api->Execution_free, "ANeuralNetworksExecution_free", true);
  resolve(api->Execution_setInput, "ANeuralNetworksExecution_setInput", true);
  resolve(api->Execution_setOutput, "ANeuralNetworksExecution_setOutput", true);
  resolve(api->Execution_startCompute, "ANeuralNetworksExecution_startCompute", true);
  resolve(api->Event_wait, "ANeuralNetworksEvent_wait", true);
  resolve(api->Event_free, "ANeuralNetworksEvent_free", true);
  // API 28
  resolve(api->Model_relaxComputationFloat32toFloat16, "ANeuralNetworksModel_relaxComputationFloat32toFloat16", false);
  // API 29
  resolve(api->Model_setOperandSymmPerChannelQuantParams, "ANeuralNetworksModel_setOperandSymmPerChannelQuantParams",
          false);
  resolve(api->getDeviceCount, "ANeuralNetworks_getDeviceCount", false);
  resolve(api->getDevice, "ANeuralNetworks_getDevice", false);
  resolve(api->Device_getName, "ANeuralNetworksDevice_getName", false);
  resolve(api->Device_getType, "ANeuralNetworksDevice_getType", false);
  resolve(api->Device_getFeatureLevel, "ANeuralNetworksDevice_getFeatureLevel", false);
  resolve(api->Compilation_createForDevices, "ANeuralNetworksCompilation_createForDevices", false);
  resolve(api->Execution_compute, "ANeuralNetworksExecution_compute", false);
  if (missing) {
    *error = std::string(path) + " lacks NNAPI functions: " + missing_names;
    dlclose(handle);
    return nullptr;
  }
  return api;
}

}  // namespace mobile_ep_nnapi
