"""The serialized NNAPI model (docs/format.md): round trips, alignment, and the reader refusing every
truncated, inconsistent or out-of-range blob with a CompileError."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from nnapi_compile_kit import compile_whole
from nnapi_compile_kit import random as rand
from nnapi_models import model, node

from mobile_ep import CompileError
from mobile_ep_nnapi import serialize
from mobile_ep_nnapi.model import ChannelQuant, NnapiModel, Operand
from mobile_ep_nnapi.nnapi import OperandCode, OperationCode

F32, I32, U8 = OperandCode.TENSOR_FLOAT32, OperandCode.TENSOR_INT32, OperandCode.TENSOR_QUANT8_ASYMM


def small_model() -> NnapiModel:
    m = NnapiModel(feature_level=3, relax_fp16=True, preference=2, device_policy=1)
    x = m.add_operand(Operand(F32, (1, 2, 2, 3)))
    w = m.add_operand(Operand(OperandCode.TENSOR_QUANT8_SYMM_PER_CHANNEL, (4, 1, 1, 3),
                              channel_quant=ChannelQuant(0, (0.5, 0.25, 0.125, 1.0))))
    m.set_value(w, np.arange(12, dtype=np.int8).reshape(4, 1, 1, 3))
    c = m.add_operand(Operand(F32, (3,)))
    m.set_value(c, np.float32([1, 2, 3]))
    fuse = m.add_operand(Operand(OperandCode.INT32))
    m.set_value(fuse, np.int32(1))
    y = m.add_operand(Operand(F32, (1, 2, 2, 3)))
    m.add_operation(OperationCode.ADD, [x, c, fuse], [y])
    m.inputs, m.outputs, m.input_names, m.output_names = [x], [y], ["x"], ["y ünïcode"]
    return m


def test_round_trip_keeps_everything():
    m = small_model()
    blob = serialize.write(m)
    back = serialize.read(blob)
    assert back == m
    assert blob[:8] == b"MEPNNAPI" and struct.unpack_from("<HH", blob, 8) == serialize.VERSION
    data_offset, data_size = struct.unpack_from("<IQ", blob, 52)
    assert data_offset % 64 == 0 and data_offset + data_size == len(blob)
    # every constant value starts 16-byte aligned in the data area
    assert all(blob.find(value, data_offset) >= 0 for value in m.values.values())


def test_a_compiled_partition_round_trips():
    proto = model([node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("Relu", ["c"])], {"x": [1, 3, 8, 8]},
                  inits={"w": rand((4, 3, 3, 3))})
    payload = compile_whole(proto)
    assert payload.format == serialize.FORMAT == "nnapi-model/1"
    assert serialize.write(serialize.read(payload.data)) == payload.data


def test_every_truncation_is_refused():
    blob = serialize.write(small_model())
    for size in range(len(blob)):
        with pytest.raises(CompileError):
            serialize.read(blob[:size])


def _patched(blob: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(blob)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


@pytest.mark.parametrize("offset, fmt, value, message", [
    (0, "<8s", b"MEPNNAPX", "magic"),
    (8, "<H", 2, "version 2"),
    (16, "<I", 6, "unknown flags"),
    (20, "<I", 9, "feature level 9"),
    (20, "<I", 2, "needs feature level 3"),  # the per-channel operand
    (24, "<i", 3, "preference 3"),
    (28, "<I", 7, "device policy 7"),
    (32, "<I", 10_000_000, "cannot fit"),
    (52, "<I", 100, "data offset"),
])
def test_out_of_range_header_fields_are_refused(offset, fmt, value, message):
    blob = serialize.write(small_model())
    with pytest.raises(CompileError, match=message):
        serialize.read(_patched(blob, offset, fmt, value))


def _section_offsets(m: NnapiModel, blob: bytes) -> dict[str, int]:
    pos = 64
    for operand in m.operands:
        pos += 20 + 4 * len(operand.dims)
        if operand.channel_quant is not None:
            pos += 8 + 4 * len(operand.channel_quant.scales)
    constants = pos
    pos += 24 * len(m.values)
    return {"constants": constants, "operations": pos}


def test_corrupt_sections_are_refused():
    m = small_model()
    blob = serialize.write(m)
    where = _section_offsets(m, blob)
    cases = {
        "unknown operand type": _patched(blob, 64, "<i", 99),
        "rank 9": _patched(blob, 68, "<I", 9),
        "not 16-byte aligned": _patched(blob, where["constants"] + 8, "<Q", 3),
        "outside": _patched(blob, where["constants"] + 8, "<Q", 1 << 40),
        "does not exist": _patched(blob, where["operations"] + 12, "<I", 77),
        "unknown operation type": _patched(blob, where["operations"], "<i", 500),
        "needs feature level 4": _patched(blob, where["operations"], "<i", int(OperationCode.ELU)),
        "non-zero reserved": _patched(blob, where["constants"] + 4, "<I", 1),
    }
    for message, corrupt in cases.items():
        with pytest.raises(CompileError, match=message):
            serialize.read(corrupt)
    with pytest.raises(CompileError, match="too long"):
        serialize.read(blob + b"\0")


def test_model_validation_catches_what_nnapi_would():
    m = small_model()
    m.operations.insert(0, m.operations[0].__class__(int(OperationCode.RELU), (4,), (0,)))
    with pytest.raises(CompileError, match="before any operation"):
        serialize.write(m)
    m = small_model()
    m.outputs = [0]
    with pytest.raises(CompileError):
        serialize.write(m)


def test_random_corruption_only_ever_raises_compile_error():
    blob = serialize.write(small_model())
    rng = random.Random(4)
    refused = 0
    for _ in range(800):
        corrupt = bytearray(blob)
        for _ in range(rng.randint(1, 4)):
            corrupt[rng.randrange(len(corrupt))] = rng.randrange(256)
        try:
            serialize.read(bytes(corrupt))
        except CompileError:
            refused += 1
    assert refused > 100
