// JNI glue for ai.mobileep.nnapi.NnapiPartition (kotlin/ai/mobileep/nnapi/NnapiPartition.kt).
//
// A partition handle is a pointer to a mobile_ep_nnapi::Partition; inputs and outputs are direct
// ByteBuffers in native byte order (what ORT's Java API and Kotlin's ByteBuffer.allocateDirect give).
#include <jni.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mobile_ep_nnapi.h"

namespace {

std::shared_ptr<const mobile_ep_nnapi::NnapiApi> SharedApi(std::string* error) {
  static std::mutex mutex;
  static std::shared_ptr<const mobile_ep_nnapi::NnapiApi> api;
  std::lock_guard<std::mutex> lock(mutex);
  if (api == nullptr) api = mobile_ep_nnapi::NnapiApi::Load(nullptr, error);
  return api;
}

void Throw(JNIEnv* env, const std::string& message) {
  jclass cls = env->FindClass("java/lang/IllegalStateException");
  if (cls != nullptr) env->ThrowNew(cls, message.c_str());
}

mobile_ep_nnapi::Partition* FromHandle(jlong handle) {
  return reinterpret_cast<mobile_ep_nnapi::Partition*>(static_cast<intptr_t>(handle));
}

}  // namespace

extern "C" {

JNIEXPORT jlong JNICALL Java_ai_mobileep_nnapi_NnapiPartition_nativeCreate(JNIEnv* env, jclass, jbyteArray blob) {
  std::string error;
  auto api = SharedApi(&error);
  if (api == nullptr) {
    Throw(env, error);
    return 0;
  }
  const jsize size = env->GetArrayLength(blob);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  env->GetByteArrayRegion(blob, 0, size, reinterpret_cast<jbyte*>(bytes.data()));
  auto partition = mobile_ep_nnapi::Partition::Create(api, bytes.data(), bytes.size(), &error);
  if (partition == nullptr) {
    Throw(env, error);
    return 0;
  }
  return static_cast<jlong>(reinterpret_cast<intptr_t>(partition.release()));
}

JNIEXPORT void JNICALL Java_ai_mobileep_nnapi_NnapiPartition_nativeClose(JNIEnv*, jclass, jlong handle) {
  delete FromHandle(handle);
}

JNIEXPORT jobjectArray JNICALL Java_ai_mobileep_nnapi_NnapiPartition_nativeNames(JNIEnv* env, jclass, jlong handle,
                                                                                jboolean outputs) {
  const auto* p = FromHandle(handle);
  const size_t count = outputs ? p->output_count() : p->input_count();
  jobjectArray names = env->NewObjectArray(static_cast<jsize>(count), env->FindClass("java/lang/String"), nullptr);
  for (size_t i = 0; i < count; ++i) {
    const std::string& name = outputs ? p->output_name(i) : p->input_name(i);
    env->SetObjectArrayElement(names, static_cast<jsize>(i), env->NewStringUTF(name.c_str()));
  }
  return names;
}

JNIEXPORT jlongArray JNICALL Java_ai_mobileep_nnapi_NnapiPartition_nativeSizes(JNIEnv* env, jclass, jlong handle,
                                                                              jboolean outputs) {
  const auto* p = FromHandle(handle);
  const size_t count = outputs ? p->output_count() : p->input_count();
  std::vector<jlong> sizes(count);
  for (size_t i = 0; i < count; ++i) sizes[i] = static_cast<jlong>(outputs ? p->output_bytes(i) : p->input_bytes(i));
  jlongArray result = env->NewLongArray(static_cast<jsize>(count));
  env->SetLongArrayRegion(result, 0, static_cast<jsize>(count), sizes.data());
  return result;
}

JNIEXPORT void JNICALL Java_ai_mobileep_nnapi_NnapiPartition_nativeRun(JNIEnv* env, jclass, jlong handle,
                                                                      jobjectArray inputs, jobjectArray outputs) {
  const auto* p = FromHandle(handle);
  std::vector<const void*> in;
  std::vector<size_t> in_sizes;
  std::vector<void*> out;
  std::vector<size_t> out_sizes;
  for (jsize i = 0; i < env->GetArrayLength(inputs); ++i) {
    jobject buffer = env->GetObjectArrayElement(inputs, i);
    in.push_back(env->GetDirectBufferAddress(buffer));
    in_sizes.push_back(static_cast<size_t>(env->GetDirectBufferCapacity(buffer)));
  }
  for (jsize i = 0; i < env->GetArrayLength(outputs); ++i) {
    jobject buffer = env->GetObjectArrayElement(outputs, i);
    out.push_back(env->GetDirectBufferAddress(buffer));
    out_sizes.push_back(static_cast<size_t>(env->GetDirectBufferCapacity(buffer)));
  }
  for (const void* address : in) {
    if (address == nullptr) return Throw(env, "inputs must be direct ByteBuffers");
  }
  for (const void* address : out) {
    if (address == nullptr) return Throw(env, "outputs must be direct ByteBuffers");
  }
  std::string error;
  if (!p->Run(in, in_sizes, out, out_sizes, &error)) Throw(env, error);
}

}  // extern "C"
