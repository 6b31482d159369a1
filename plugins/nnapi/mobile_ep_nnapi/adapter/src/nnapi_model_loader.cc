// Parsing and checking a serialized NNAPI model (plugins/nnapi/docs/format.md, version 1.x).
// The checks are those of mobile_ep_nnapi/serialize.py and model.py: a blob either parses completely
// and consistently or is refused with a message saying where.
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "mobile_ep_nnapi.h"

namespace mobile_ep_nnapi {
namespace {

constexpr char kMagic[8] = {'M', 'E', 'P', 'N', 'N', 'A', 'P', 'I'};
constexpr uint32_t kHeaderSize = 64;
constexpr uint32_t kDataAlignment = 64;
constexpr uint64_t kValueAlignment = 16;
constexpr uint32_t kMaxRank = 8;
constexpr uint32_t kMaxFeatureLevel = 8;
constexpr int32_t kMaxOperandType = 14;     // TENSOR_QUANT8_ASYMM_SIGNED (MODEL operands are refused)
constexpr int32_t kMaxOperationType = 105;  // REVERSE

class Reader {
 public:
  Reader(const uint8_t* data, size_t end) : data_(data), end_(end) {}

  size_t pos() const { return pos_; }
  void seek(size_t pos) { pos_ = pos; }
  size_t left() const { return pos_ <= end_ ? end_ - pos_ : 0; }

  template <typename T>
  bool Take(T* value, const char* what, std::string* error) {
    if (left() < sizeof(T)) {
      *error = std::string("serialized NNAPI model is truncated: ") + what + " at byte " + std::to_string(pos_);
      return false;
    }
    std::memcpy(value, data_ + pos_, sizeof(T));  // the format is little-endian, as every Android ABI
    pos_ += sizeof(T);
    return true;
  }

  // Refuse a count that cannot fit in what is left, before allocating anything for it.
  bool Fits(uint64_t count, uint64_t size, const char* what, std::string* error) const {
    if (size != 0 && count > left() / size) {
      *error = std::string("serialized NNAPI model is corrupt: ") + std::to_string(count) + " " + what +
               " cannot fit in the " + std::to_string(left()) + " bytes left at byte " + std::to_string(pos_);
      return false;
    }
    return true;
  }

  bool TakeU32s(uint64_t count, std::vector<uint32_t>* out, const char* what, std::string* error) {
    if (!Fits(count, 4, what, error)) return false;
    out->resize(static_cast<size_t>(count));
    for (auto& v : *out) {
      if (!Take(&v, what, error)) return false;
    }
    return true;
  }

 private:
  const uint8_t* data_;
  size_t end_;
  size_t pos_ = 0;
};

bool IsScalar(int32_t type) {
  return type == ANEURALNETWORKS_FLOAT32 || type == ANEURALNETWORKS_INT32 || type == ANEURALNETWORKS_UINT32 ||
         type == ANEURALNETWORKS_BOOL || type == ANEURALNETWORKS_FLOAT16;
}

uint32_t OperandFeatureLevel(int32_t type) {
  if (type <= ANEURALNETWORKS_TENSOR_QUANT8_ASYMM) return 1;
  if (type <= ANEURALNETWORKS_TENSOR_QUANT8_SYMM) return 3;
  return 4;
}

uint32_t OperationFeatureLevel(int32_t type) {
  if (type <= 28) return 1;
  if (type <= 37) return 2;
  if (type <= 94) return 3;
  if (type <= 101) return 4;
  if (type <= 103) return 6;
  return 7;
}

size_t ElementSize(int32_t type) {
  switch (type) {
    case ANEURALNETWORKS_FLOAT32:
    case ANEURALNETWORKS_INT32:
    case ANEURALNETWORKS_UINT32:
    case ANEURALNETWORKS_TENSOR_FLOAT32:
    case ANEURALNETWORKS_TENSOR_INT32:
      return 4;
    case ANEURALNETWORKS_TENSOR_QUANT16_SYMM:
    case ANEURALNETWORKS_TENSOR_FLOAT16:
    case ANEURALNETWORKS_FLOAT16:
    case ANEURALNETWORKS_TENSOR_QUANT16_ASYMM:
      return 2;
    case ANEURALNETWORKS_TENSOR_QUANT8_ASYMM:
    case ANEURALNETWORKS_BOOL:
    case ANEURALNETWORKS_TENSOR_BOOL8:
    case ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL:
    case ANEURALNETWORKS_TENSOR_QUANT8_SYMM:
    case ANEURALNETWORKS_TENSOR_QUANT8_ASYMM_SIGNED:
      return 1;
    default:
      return 0;
  }
}

bool Fail(std::string* error, const std::string& message) {
  *error = "serialized NNAPI model: " + message;
  return false;
}

bool Validate(const SerializedModel& m, std::string* error) {
  if (m.feature_level < 1 || m.feature_level > kMaxFeatureLevel)
    return Fail(error, "feature level " + std::to_string(m.feature_level) + " is not 1..8");
  if (m.preference < 0 || m.preference > 2)
    return Fail(error, "execution preference " + std::to_string(m.preference) + " is not 0, 1 or 2");
  if (m.device_policy > 2) return Fail(error, "device policy " + std::to_string(m.device_policy) + " is not 0, 1 or 2");
  const size_t count = m.operands.size();
  for (size_t i = 0; i < count; ++i) {
    const SerializedOperand& o = m.operands[i];
    const std::string where = "operand " + std::to_string(i);
    if (o.type < 0 || o.type > kMaxOperandType) return Fail(error, where + ": unknown operand type " + std::to_string(o.type));
    if (OperandFeatureLevel(o.type) > m.feature_level)
      return Fail(error, where + ": its type needs a higher feature level than the model's");
    if (IsScalar(o.type) && !o.dims.empty()) return Fail(error, where + ": a scalar has dimensions");
    for (uint32_t d : o.dims) {
      if (d >= (1u << 31)) return Fail(error, where + ": dimension out of range");
    }
    if (!std::isfinite(o.scale) || o.scale < 0) return Fail(error, where + ": scale is not finite and non-negative");
    const bool per_channel_type = o.type == ANEURALNETWORKS_TENSOR_QUANT8_SYMM_PER_CHANNEL;
    if (o.per_channel != per_channel_type)
      return Fail(error, where + ": per-channel parameters go with TENSOR_QUANT8_SYMM_PER_CHANNEL only");
    if (o.per_channel && (o.channel_dim >= o.dims.size() || o.channel_scales.size() != o.dims[o.channel_dim]))
      return Fail(error, where + ": per-channel parameters do not fit its dimensions");
  }
  std::set<uint32_t> defined;
  for (const SerializedConstant& c : m.constants) {
    if (c.operand >= count) return Fail(error, "a constant value is given for a missing operand");
    if (c.length != OperandBytes(m.operands[c.operand]))
      return Fail(error, "operand " + std::to_string(c.operand) + ": the constant value has the wrong size");
    defined.insert(c.operand);
  }
  std::set<uint32_t> inputs(m.inputs.begin(), m.inputs.end());
  std::set<uint32_t> outputs(m.outputs.begin(), m.outputs.end());
  if (inputs.size() != m.inputs.size() || outputs.size() != m.outputs.size())
    return Fail(error, "a model input or output is listed twice");
  for (uint32_t i : m.inputs) {
    if (i >= count) return Fail(error, "a model input operand does not exist");
    if (defined.count(i)) return Fail(error, "a model input is a constant");
    if (IsScalar(m.operands[i].type)) return Fail(error, "a model input is a scalar");
    defined.insert(i);
  }
  for (size_t n = 0; n < m.operations.size(); ++n) {
    const SerializedOperation& op = m.operations[n];
    const std::string where = "operation " + std::to_string(n);
    if (op.type < 0 || op.type > kMaxOperationType) return Fail(error, where + ": unknown operation type " + std::to_string(op.type));
    if (OperationFeatureLevel(op.type) > m.feature_level)
      return Fail(error, where + ": needs a higher feature level than the model's");
    for (uint32_t i : op.inputs) {
      if (i >= count) return Fail(error, where + ": operand " + std::to_string(i) + " does not exist");
      if (!defined.count(i)) return Fail(error, where + " reads operand " + std::to_string(i) + " before it is written");
    }
    for (uint32_t i : op.outputs) {
      if (i >= count) return Fail(error, where + ": operand " + std::to_string(i) + " does not exist");
      if (defined.count(i)) return Fail(error, where + " writes operand " + std::to_string(i) + " twice");
      defined.insert(i);
    }
  }
  for (uint32_t i : m.outputs) {
    if (i >= count) return Fail(error, "a model output operand does not exist");
    if (IsScalar(m.operands[i].type)) return Fail(error, "a model output is a scalar");
    if (inputs.count(i)) return Fail(error, "an operand is both a model input and a model output");
    for (const SerializedConstant& c : m.constants) {
      if (c.operand == i) return Fail(error, "a model output is a constant");
    }
    if (!defined.count(i)) return Fail(error, "a model output is never written");
  }
  if (m.input_names.size() != m.inputs.size() || m.output_names.size() != m.outputs.size())
    return Fail(error, "input/output names do not match the inputs/outputs");
  return true;
}

}  // namespace

size_t OperandBytes(const SerializedOperand& operand) {
  size_t bytes = ElementSize(operand.type);
  for (uint32_t d : operand.dims) bytes *= d;
  return bytes;
}

bool ParseModel(const uint8_t* blob, size_t size, SerializedModel* out, std::string* error) {
  SerializedModel m;
  if (size < kHeaderSize)
    return Fail(error, "truncated: " + std::to_string(size) + " bytes, the header alone is 64");
  if (std::memcmp(blob, kMagic, sizeof kMagic) != 0) return Fail(error, "bad magic (not a serialized NNAPI model)");
  Reader header(blob, kHeaderSize);
  header.seek(8);
  uint32_t header_size = 0, n_operands = 0, n_operations = 0, n_inputs = 0, n_outputs = 0, n_constants = 0;
  uint32_t data_offset = 0;
  uint64_t data_size = 0;
  bool ok = header.Take(&m.version_major, "header", error) && header.Take(&m.version_minor, "header", error) &&
            header.Take(&header_size, "header", error) && header.Take(&m.flags, "header", error) &&
            header.Take(&m.feature_level, "header", error) && header.Take(&m.preference, "header", error) &&
            header.Take(&m.device_policy, "header", error) && header.Take(&n_operands, "header", error) &&
            header.Take(&n_operations, "header", error) && header.Take(&n_inputs, "header", error) &&
            header.Take(&n_outputs, "header", error) && header.Take(&n_constants, "header", error) &&
            header.Take(&data_offset, "header", error) && header.Take(&data_size, "header", error);
  if (!ok) return false;
  if (m.version_major != 1)
    return Fail(error, "version " + std::to_string(m.version_major) + "." + std::to_string(m.version_minor) +
                           " is not supported (this reader: 1.x)");
  if (header_size < kHeaderSize || header_size > size) return Fail(error, "bad header size");
  if ((m.flags & ~1u) != 0) return Fail(error, "unknown flags");
  if (data_offset % kDataAlignment != 0 || data_offset < header_size)
    return Fail(error, "the data offset is not a multiple of 64 after the header");
  if (data_offset > size || data_size != size - data_offset)
    return Fail(error, "truncated or too long: the header's data area does not end the blob");
  m.data = blob + data_offset;
  m.data_size = data_size;

  Reader r(blob, data_offset);
  r.seek(header_size);
  if (!r.Fits(n_operands, 20, "operands", error)) return false;
  m.operands.resize(n_operands);
  for (uint32_t i = 0; i < n_operands; ++i) {
    SerializedOperand& o = m.operands[i];
    uint32_t rank = 0, oflags = 0;
    if (!r.Take(&o.type, "operand", error) || !r.Take(&rank, "operand", error) || !r.Take(&o.scale, "operand", error) ||
        !r.Take(&o.zero_point, "operand", error) || !r.Take(&oflags, "operand", error))
      return false;
    if (rank > kMaxRank) return Fail(error, "operand " + std::to_string(i) + " has rank " + std::to_string(rank));
    if ((oflags & ~1u) != 0) return Fail(error, "operand " + std::to_string(i) + " has unknown flags");
    if (!r.TakeU32s(rank, &o.dims, "operand dims", error)) return false;
    o.per_channel = (oflags & 1u) != 0;
    if (o.per_channel) {
      uint32_t n_scales = 0;
      if (!r.Take(&o.channel_dim, "per-channel parameters", error) || !r.Take(&n_scales, "per-channel parameters", error))
        return false;
      if (!r.Fits(n_scales, 4, "per-channel scales", error)) return false;
      o.channel_scales.resize(n_scales);
      for (auto& s : o.channel_scales) {
        if (!r.Take(&s, "per-channel scales", error)) return false;
      }
    }
  }
  if (!r.Fits(n_constants, 24, "constant values", error)) return false;
  m.constants.resize(n_constants);
  std::set<uint32_t> seen;
  for (uint32_t i = 0; i < n_constants; ++i) {
    SerializedConstant& c = m.constants[i];
    uint32_t reserved = 0;
    if (!r.Take(&c.operand, "constant", error) || !r.Take(&reserved, "constant", error) ||
        !r.Take(&c.offset, "constant", error) || !r.Take(&c.length, "constant", error))
      return false;
    if (reserved != 0) return Fail(error, "constant value " + std::to_string(i) + " has a non-zero reserved field");
    if (c.offset % kValueAlignment != 0) return Fail(error, "constant value " + std::to_string(i) + " is not 16-byte aligned");
    if (c.offset > data_size || c.length > data_size - c.offset)
      return Fail(error, "constant value " + std::to_string(i) + " lies outside the data area");
    if (!seen.insert(c.operand).second) return Fail(error, "an operand has two constant values");
  }
  if (!r.Fits(n_operations, 12, "operations", error)) return false;
  m.operations.resize(n_operations);
  for (uint32_t i = 0; i < n_operations; ++i) {
    SerializedOperation& op = m.operations[i];
    uint32_t n_in = 0, n_out = 0;
    if (!r.Take(&op.type, "operation", error) || !r.Take(&n_in, "operation", error) || !r.Take(&n_out, "operation", error))
      return false;
    if (!r.TakeU32s(n_in, &op.inputs, "operation inputs", error) ||
        !r.TakeU32s(n_out, &op.outputs, "operation outputs", error))
      return false;
  }
  if (!r.TakeU32s(n_inputs, &m.inputs, "model inputs", error) || !r.TakeU32s(n_outputs, &m.outputs, "model outputs", error))
    return false;
  for (uint32_t i = 0; i < n_inputs + n_outputs; ++i) {
    uint32_t length = 0;
    if (!r.Take(&length, "name length", error)) return false;
    if (!r.Fits(length, 1, "name bytes", error)) return false;
    std::string name(reinterpret_cast<const char*>(blob + r.pos()), length);
    r.seek(r.pos() + length + ((4 - length % 4) % 4));
    if (r.pos() > data_offset) return Fail(error, "truncated in a name");
    (i < n_inputs ? m.input_names : m.output_names).push_back(name);
  }
  for (size_t p = r.pos(); p < data_offset; ++p) {
    if (blob[p] != 0) return Fail(error, "unexpected bytes before the data area");
  }
  if (!Validate(m, error)) return false;
  *out = std::move(m);
  return true;
}

}  // namespace mobile_ep_nnapi
