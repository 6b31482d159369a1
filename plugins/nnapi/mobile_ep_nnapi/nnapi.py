"""NNAPI's enumerations: operand types, operation types with their feature levels, and the small enums.

The values are those of the NDK's ``NeuralNetworksTypes.h`` (``ANEURALNETWORKS_*``); the feature level of
each operation is the one in which it first appeared (FL1..FL5 = Android API 27..31, FL6/7/8 = Android 13,
14, 15).  The C++ adapter's declaration header (``adapter/include/mobile_ep_nnapi_decls.h``) carries the
same numbers; a test keeps the two in agreement.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = [
    "OperandCode",
    "OperationCode",
    "OPERATION_FEATURE_LEVEL",
    "OPERAND_FEATURE_LEVEL",
    "FuseCode",
    "PaddingCode",
    "Preference",
    "DevicePolicy",
    "TENSOR_CODES",
    "SCALAR_CODES",
    "QUANTIZED_CODES",
    "numpy_dtype",
    "element_size",
    "MAX_FEATURE_LEVEL",
]

#: The newest feature level (Android 15).
MAX_FEATURE_LEVEL = 8


class OperandCode(enum.IntEnum):
    """``OperandCode``: the type of an operand."""

    FLOAT32 = 0
    INT32 = 1
    UINT32 = 2
    TENSOR_FLOAT32 = 3
    TENSOR_INT32 = 4
    TENSOR_QUANT8_ASYMM = 5
    BOOL = 6
    TENSOR_QUANT16_SYMM = 7
    TENSOR_FLOAT16 = 8
    TENSOR_BOOL8 = 9
    FLOAT16 = 10
    TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
    TENSOR_QUANT16_ASYMM = 12
    TENSOR_QUANT8_SYMM = 13
    TENSOR_QUANT8_ASYMM_SIGNED = 14
    MODEL = 15


#: Feature level that introduced each operand type.
OPERAND_FEATURE_LEVEL: dict[OperandCode, int] = {
    **{c: 1 for c in (OperandCode.FLOAT32, OperandCode.INT32, OperandCode.UINT32, OperandCode.TENSOR_FLOAT32,
                      OperandCode.TENSOR_INT32, OperandCode.TENSOR_QUANT8_ASYMM)},
    **{c: 3 for c in (OperandCode.BOOL, OperandCode.TENSOR_QUANT16_SYMM, OperandCode.TENSOR_FLOAT16,
                      OperandCode.TENSOR_BOOL8, OperandCode.FLOAT16, OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL,
                      OperandCode.TENSOR_QUANT16_ASYMM, OperandCode.TENSOR_QUANT8_SYMM)},
    OperandCode.TENSOR_QUANT8_ASYMM_SIGNED: 4,
    OperandCode.MODEL: 4,
}

SCALAR_CODES = frozenset({OperandCode.FLOAT32, OperandCode.INT32, OperandCode.UINT32, OperandCode.BOOL,
                          OperandCode.FLOAT16})
TENSOR_CODES = frozenset(c for c in OperandCode if c not in SCALAR_CODES and c != OperandCode.MODEL)
QUANTIZED_CODES = frozenset({OperandCode.TENSOR_QUANT8_ASYMM, OperandCode.TENSOR_QUANT16_SYMM,
                             OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL, OperandCode.TENSOR_QUANT16_ASYMM,
                             OperandCode.TENSOR_QUANT8_SYMM, OperandCode.TENSOR_QUANT8_ASYMM_SIGNED})

_NUMPY = {
    OperandCode.FLOAT32: np.float32, OperandCode.INT32: np.int32, OperandCode.UINT32: np.uint32,
    OperandCode.TENSOR_FLOAT32: np.float32, OperandCode.TENSOR_INT32: np.int32,
    OperandCode.TENSOR_QUANT8_ASYMM: np.uint8, OperandCode.BOOL: np.bool_,
    OperandCode.TENSOR_QUANT16_SYMM: np.int16, OperandCode.TENSOR_FLOAT16: np.float16,
    OperandCode.TENSOR_BOOL8: np.bool_, OperandCode.FLOAT16: np.float16,
    OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL: np.int8, OperandCode.TENSOR_QUANT16_ASYMM: np.uint16,
    OperandCode.TENSOR_QUANT8_SYMM: np.int8, OperandCode.TENSOR_QUANT8_ASYMM_SIGNED: np.int8,
}


def numpy_dtype(code: int) -> type:
    """The numpy type holding one element of an operand of type *code* (BOOL is one byte)."""
    try:
        return _NUMPY[OperandCode(code)]
    except (KeyError, ValueError):
        raise ValueError(f"operand type {code} has no element type") from None


def element_size(code: int) -> int:
    return int(np.dtype(numpy_dtype(code)).itemsize)


class OperationCode(enum.IntEnum):
    """``OperationCode``: what an operation computes."""

    # Feature level 1 (Android 8.1, API 27)
    ADD = 0
    AVERAGE_POOL_2D = 1
    CONCATENATION = 2
    CONV_2D = 3
    DEPTHWISE_CONV_2D = 4
    DEPTH_TO_SPACE = 5
    DEQUANTIZE = 6
    EMBEDDING_LOOKUP = 7
    FLOOR = 8
    FULLY_CONNECTED = 9
    HASHTABLE_LOOKUP = 10
    L2_NORMALIZATION = 11
    L2_POOL_2D = 12
    LOCAL_RESPONSE_NORMALIZATION = 13
    LOGISTIC = 14
    LSH_PROJECTION = 15
    LSTM = 16
    MAX_POOL_2D = 17
    MUL = 18
    RELU = 19
    RELU1 = 20
    RELU6 = 21
    RESHAPE = 22
    RESIZE_BILINEAR = 23
    RNN = 24
    SOFTMAX = 25
    SPACE_TO_DEPTH = 26
    SVDF = 27
    TANH = 28
    # Feature level 2 (Android 9, API 28)
    BATCH_TO_SPACE_ND = 29
    DIV = 30
    MEAN = 31
    PAD = 32
    SPACE_TO_BATCH_ND = 33
    SQUEEZE = 34
    STRIDED_SLICE = 35
    SUB = 36
    TRANSPOSE = 37
    # Feature level 3 (Android 10, API 29)
    ABS = 38
    ARGMAX = 39
    ARGMIN = 40
    AXIS_ALIGNED_BBOX_TRANSFORM = 41
    BIDIRECTIONAL_SEQUENCE_LSTM = 42
    BIDIRECTIONAL_SEQUENCE_RNN = 43
    BOX_WITH_NMS_LIMIT = 44
    CAST = 45
    CHANNEL_SHUFFLE = 46
    DETECTION_POSTPROCESSING = 47
    EQUAL = 48
    EXP = 49
    EXPAND_DIMS = 50
    GATHER = 51
    GENERATE_PROPOSALS = 52
    GREATER = 53
    GREATER_EQUAL = 54
    GROUPED_CONV_2D = 55
    HEATMAP_MAX_KEYPOINT = 56
    INSTANCE_NORMALIZATION = 57
    LESS = 58
    LESS_EQUAL = 59
    LOG = 60
    LOGICAL_AND = 61
    LOGICAL_NOT = 62
    LOGICAL_OR = 63
    LOG_SOFTMAX = 64
    MAXIMUM = 65
    MINIMUM = 66
    NEG = 67
    NOT_EQUAL = 68
    PAD_V2 = 69
    POW = 70
    PRELU = 71
    QUANTIZE = 72
    QUANTIZED_16BIT_LSTM = 73
    RANDOM_MULTINOMIAL = 74
    REDUCE_ALL = 75
    REDUCE_ANY = 76
    REDUCE_MAX = 77
    REDUCE_MIN = 78
    REDUCE_PROD = 79
    REDUCE_SUM = 80
    ROI_ALIGN = 81
    ROI_POOLING = 82
    RSQRT = 83
    SELECT = 84
    SIN = 85
    SLICE = 86
    SPLIT = 87
    SQRT = 88
    TILE = 89
    TOPK_V2 = 90
    TRANSPOSE_CONV_2D = 91
    UNIDIRECTIONAL_SEQUENCE_LSTM = 92
    UNIDIRECTIONAL_SEQUENCE_RNN = 93
    RESIZE_NEAREST_NEIGHBOR = 94
    # Feature level 4 (Android 11, API 30)
    QUANTIZED_LSTM = 95
    IF = 96
    WHILE = 97
    ELU = 98
    HARD_SWISH = 99
    FILL = 100
    RANK = 101
    # Feature level 6 (Android 13)
    BATCH_MATMUL = 102
    PACK = 103
    # Feature level 7 (Android 14)
    MIRROR_PAD = 104
    REVERSE = 105


def _level(code: int) -> int:
    if code <= 28:
        return 1
    if code <= 37:
        return 2
    if code <= 94:
        return 3
    if code <= 101:
        return 4
    if code <= 103:
        return 6
    return 7


#: Feature level that introduced each operation.
OPERATION_FEATURE_LEVEL: dict[OperationCode, int] = {op: _level(op.value) for op in OperationCode}


class FuseCode(enum.IntEnum):
    """``FuseCode``: the activation an operation applies to its result."""

    NONE = 0
    RELU = 1
    RELU1 = 2
    RELU6 = 3


class PaddingCode(enum.IntEnum):
    """``PaddingCode`` of the implicit-padding signatures (SAME puts the odd pixel at the end)."""

    SAME = 1
    VALID = 2


class Preference(enum.IntEnum):
    """``PreferenceCode`` given to ``ANeuralNetworksCompilation_setPreference``."""

    LOW_POWER = 0
    FAST_SINGLE_ANSWER = 1
    SUSTAINED_SPEED = 2


class DevicePolicy(enum.IntEnum):
    """Which NNAPI devices the adapter compiles for (mobile-ep's field; NNAPI has no such enum)."""

    #: ``ANeuralNetworksCompilation_create``: NNAPI picks, the CPU reference included.
    ANY = 0
    #: Every device except the CPU ones (``nnapi-reference`` and type CPU): ``createForDevices`` (API 29).
    CPU_DISABLED = 1
    #: ``nnapi-reference`` only (for validation): ``createForDevices`` (API 29).
    CPU_ONLY = 2
