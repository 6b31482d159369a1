// Drives the mobile-ep NNAPI adapter on a workstation: host_runner LIBRARY BLOB
// loads the NNAPI functions from LIBRARY (the recording stub), builds and compiles the serialized model
// in BLOB exactly as on a device, runs it once on patterned inputs, and prints what it chose.
// Exit code 0 on success, 2 when the adapter refuses the model (message on stderr).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mobile_ep_nnapi.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s LIBRARY BLOB\n", argv[0]);
    return 1;
  }
  std::ifstream file(argv[2], std::ios::binary);
  std::vector<uint8_t> blob((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::string error;
  auto api = mobile_ep_nnapi::NnapiApi::Load(argv[1], &error);
  if (api == nullptr) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 2;
  }
  auto partition = mobile_ep_nnapi::Partition::Create(api, blob.data(), blob.size(), &error);
  if (partition == nullptr) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 2;
  }
  std::vector<std::vector<uint8_t>> inputs(partition->input_count()), outputs(partition->output_count());
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<size_t> in_sizes, out_sizes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].resize(partition->input_bytes(i));
    for (size_t k = 0; k < inputs[i].size(); ++k) inputs[i][k] = static_cast<uint8_t>(k % 251);
    in.push_back(inputs[i].data());
    in_sizes.push_back(inputs[i].size());
    std::printf("input %s %zu\n", partition->input_name(i).c_str(), inputs[i].size());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].resize(partition->output_bytes(i));
    out.push_back(outputs[i].data());
    out_sizes.push_back(outputs[i].size());
    std::printf("output %s %zu\n", partition->output_name(i).c_str(), outputs[i].size());
  }
  if (!partition->Run(in, in_sizes, out, out_sizes, &error)) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 2;
  }
  for (const std::string& device : partition->devices()) std::printf("device %s\n", device.empty() ? "*" : device.c_str());
  std::printf("ok\n");
  return 0;
}
