"""The ML Program weight file (``weights/weight.bin``): MIL blob storage, read with numpy.

Layout (coremltools ``mlmodel/src/MILBlob/Blob/StorageFormat.hpp``), little-endian, 64-byte aligned::

    header   uint32 count, uint32 version (2), 7 x uint64 reserved          (64 bytes)
    metadata uint32 sentinel 0xDEADBEEF, uint32 data type, uint64 size in bytes,
             uint64 data offset, uint64 padding size in bits, 4 x uint64 reserved
    data     at the metadata's offset

A constant in the program refers to a blob by the offset of its *metadata*.
"""

from __future__ import annotations

import struct

import numpy as np

from mobile_ep import CompileError

__all__ = ["BlobReader", "BLOB_DTYPES"]

SENTINEL = 0xDEADBEEF
_HEADER = struct.Struct("<II")
_METADATA = struct.Struct("<IIQQ")

#: BlobDataType codes (``MILBlob/Blob/BlobDataType.hpp``) and their numpy types.
BLOB_DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f2"),
    2: np.dtype("<f4"),
    3: np.dtype("u1"),
    4: np.dtype("i1"),
    6: np.dtype("<i2"),
    7: np.dtype("<u2"),
    14: np.dtype("<i4"),
    15: np.dtype("<u4"),
}


class BlobReader:
    """Reads the blobs of one weight file; every read is bounds- and sentinel-checked."""

    def __init__(self, data: bytes, name: str = "weights/weight.bin") -> None:
        self.data = data
        self.name = name
        if len(data) < 64:
            raise CompileError(f"coreml: {name} is truncated ({len(data)} bytes, the header alone is 64)")
        self.count, self.version = _HEADER.unpack_from(data, 0)
        if self.version != 2:
            raise CompileError(f"coreml: {name} has blob storage version {self.version}; the emulator reads 2")

    def read(self, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """The blob whose metadata is at *offset*, as an array of *dtype* and *shape*."""
        where = f"{self.name} at offset {offset}"
        if offset < 64 or offset + _METADATA.size > len(self.data):
            raise CompileError(f"coreml: {where}: no blob metadata there (the file has {len(self.data)} bytes)")
        sentinel, code, size, data_offset = _METADATA.unpack_from(self.data, offset)
        if sentinel != SENTINEL:
            raise CompileError(f"coreml: {where}: bad blob sentinel {sentinel:#x}")
        stored = BLOB_DTYPES.get(code)
        if stored is None:
            raise CompileError(f"coreml: {where}: blob data type {code} is not one the emulator reads")
        if data_offset + size > len(self.data):
            raise CompileError(f"coreml: {where}: the blob ({size} bytes at {data_offset}) runs past the end "
                               f"of the file ({len(self.data)} bytes)")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if stored.itemsize * count != size:
            raise CompileError(f"coreml: {where}: {size} bytes of {stored.name} for a tensor of shape "
                               f"{list(shape)}")
        if np.dtype(dtype).itemsize != stored.itemsize or np.dtype(dtype).kind != stored.kind:
            raise CompileError(f"coreml: {where}: the program declares {np.dtype(dtype).name}, the blob holds "
                               f"{stored.name}")
        array = np.frombuffer(self.data, dtype=stored, count=count, offset=data_offset)
        return array.reshape(shape).astype(np.dtype(dtype).newbyteorder("="), copy=True)
