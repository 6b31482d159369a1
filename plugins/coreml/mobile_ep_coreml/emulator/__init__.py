"""The host emulator of compiled Core ML partitions: runs a saved ``.mlpackage`` with numpy.

It reads only what is written to disk — ``Data/com.apple.CoreML/model.mlmodel`` (the Model protobuf,
parsed with coremltools' protobuf classes) and ``weights/weight.bin`` — never the program coremltools
built in memory, so what it checks is exactly what an app ships.  ML Programs run through
:class:`~.program.MILInterpreter`, NeuralNetwork models through :class:`~.neuralnetwork.NNInterpreter`.

Around the model it does what the Swift runtime adapter does on the device: it maps ONNX tensor names to
Core ML feature names (the ``com.github.mobile-ep.io`` entry of the model's metadata), converts inputs to
the feature's array type (int64 to int32, bool to the float or int32 feature Core ML declares), checks
shapes against the feature's fixed, ranged or enumerated shapes as Core ML does, and converts the
outputs back to the ONNX types and shapes.

A multifunction package (one ML Program holding several functions over one weight file, iOS 18 / macOS 15,
written by :mod:`mobile_ep_coreml.functions`) runs one function at a time: ``Package(files, function=NAME)``
(by default the model's ``defaultFunctionName``) takes that function's inputs and outputs from its
``FunctionDescription`` and its ONNX mapping from the ``functions`` entry of the I/O metadata.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from mobile_ep import CompileError

__all__ = ["IO_METADATA_KEY", "Package", "load_package", "run_package"]

#: The model metadata entry holding the ONNX <-> Core ML feature mapping (JSON).
IO_METADATA_KEY = "com.github.mobile-ep.io"
MODEL_PATH = "Data/com.apple.CoreML/model.mlmodel"
WEIGHTS_PATH = "Data/com.apple.CoreML/weights/weight.bin"

_ARRAY_TYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "DOUBLE": np.float64, "INT32": np.int32}
_ONNX_TYPES = {"FLOAT": np.float32, "FLOAT16": np.float16, "DOUBLE": np.float64, "INT32": np.int32,
               "INT64": np.int64, "BOOL": np.bool_, "INT8": np.int8, "UINT8": np.uint8}


class Package:
    """A parsed ``.mlpackage``: its Model protobuf, weights and I/O mapping, ready to run (*function*: the
    function of a multifunction package to run; ``None``: its default function, or ``main``)."""

    def __init__(self, files: Mapping[str, bytes], function: str | None = None) -> None:
        from mobile_ep_coreml.mil import coremltools

        coremltools()
        from coremltools.proto import Model_pb2

        if MODEL_PATH not in files:
            raise CompileError(f"coreml: the package has no {MODEL_PATH}")
        self.model = Model_pb2.Model()
        try:
            self.model.ParseFromString(files[MODEL_PATH])
        except Exception as exc:
            raise CompileError(f"coreml: {MODEL_PATH} is not a Core ML model ({exc})") from None
        kind = self.model.WhichOneof("Type")
        description = self.model.description
        raw_io = description.metadata.userDefined.get(IO_METADATA_KEY)
        if raw_io is None:
            raise CompileError(f"coreml: the model has no {IO_METADATA_KEY} metadata (not written by mobile-ep)")
        self.io = json.loads(raw_io)
        self.functions = [f.name for f in description.functions]
        if self.functions:
            self.function = function if function is not None else description.defaultFunctionName
            if self.function not in self.functions:
                raise CompileError(f"coreml: the package has no function {self.function!r} (it has "
                                   f"{', '.join(self.functions)})")
            if self.function not in self.io.get("functions", {}):
                raise CompileError(f"coreml: the {IO_METADATA_KEY} metadata maps no function {self.function!r}")
            self.io = self.io["functions"][self.function]
            description = next(f for f in description.functions if f.name == self.function)
        elif function not in (None, "main"):
            raise CompileError(f"coreml: the package has one function, main, not {function!r}")
        else:
            self.function = "main"
        self.features = {f.name: f for f in list(description.input) + list(description.output)}
        self.kind = kind
        if kind == "mlProgram":
            from .program import MILInterpreter

            self.interpreter: Any = MILInterpreter(self.model, files.get(WEIGHTS_PATH), self.function)
        elif kind == "neuralNetwork":
            from .neuralnetwork import NNInterpreter

            self.interpreter = NNInterpreter(self.model)
        else:
            raise CompileError(f"coreml: a {kind} model is not something mobile-ep emulates")

    @property
    def op_types(self) -> list[str]:
        return list(self.interpreter.op_types)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {}
        for spec in self.io["inputs"]:
            if spec["name"] not in inputs:
                raise CompileError(f"coreml: no value for input {spec['name']!r}")
            feature = self.features.get(spec["feature"])
            if feature is None:
                raise CompileError(f"coreml: the model has no input feature {spec['feature']!r}")
            feeds[spec["feature"]] = _to_feature(np.asarray(inputs[spec["name"]]), feature)
        results = self.interpreter.run(feeds)
        outputs = {}
        for spec in self.io["outputs"]:
            if spec["feature"] not in results:
                raise CompileError(f"coreml: the model produced no {spec['feature']!r}")
            feature = self.features.get(spec["feature"])
            value = np.asarray(results[spec["feature"]])
            if feature is not None and feature.type.WhichOneof("Type") == "multiArrayType":
                value = value.astype(_array_type(feature), copy=False)  # what MLMultiArray holds
            outputs[spec["name"]] = _from_feature(value, spec)
        return outputs


def _array_type(feature: Any) -> Any:
    from coremltools.proto import FeatureTypes_pb2

    name = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(feature.type.multiArrayType.dataType)
    if name not in _ARRAY_TYPES:
        raise CompileError(f"coreml: feature {feature.name!r} has array type {name}")
    return _ARRAY_TYPES[name]


def _to_feature(array: np.ndarray, feature: Any) -> np.ndarray:
    """What the app puts in the MLMultiArray: the feature's element type, checked against its shapes."""
    if feature.type.WhichOneof("Type") != "multiArrayType":
        raise CompileError(f"coreml: input feature {feature.name!r} is not a multi-array")
    array_type = feature.type.multiArrayType
    if array.ndim == 0:
        array = array.reshape(1)
    shape = tuple(array.shape)
    default = tuple(int(d) for d in array_type.shape)
    flexibility = array_type.WhichOneof("ShapeFlexibility")
    if flexibility == "shapeRange":
        ranges = array_type.shapeRange.sizeRanges
        ok = len(ranges) == len(shape) and all(
            r.lowerBound <= d and (r.upperBound < 0 or d <= r.upperBound) for r, d in zip(ranges, shape, strict=True))
        allowed = "[" + ", ".join(f"{r.lowerBound}..{'inf' if r.upperBound < 0 else r.upperBound}"
                                  for r in ranges) + "]"
    elif flexibility == "enumeratedShapes":
        options = [tuple(int(d) for d in s.shape) for s in array_type.enumeratedShapes.shapes]
        ok = shape in options
        allowed = " or ".join(str(list(o)) for o in options)
    else:
        ok = shape == default
        allowed = str(list(default))
    if not ok:
        raise CompileError(f"coreml: input {feature.name!r} has shape {list(shape)}; the model takes {allowed}")
    target = _array_type(feature)
    if array.dtype == np.bool_:
        return array.astype(target)
    if np.issubdtype(array.dtype, np.integer) and target == np.int32:
        info = np.iinfo(np.int32)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise CompileError(f"coreml: input {feature.name!r} holds values outside the int32 range Core ML uses")
    return array.astype(target)


def _from_feature(value: np.ndarray, spec: Mapping[str, Any]) -> np.ndarray:
    dtype = _ONNX_TYPES.get(spec.get("dtype", ""))
    if dtype is None:
        raise CompileError(f"coreml: output {spec['name']!r} has ONNX type {spec.get('dtype')}")
    value = (value != 0) if dtype is np.bool_ else value.astype(dtype)
    shape = spec.get("shape")
    if shape is not None and len(shape) != value.ndim:
        if len(shape) == 0 and value.size == 1:
            value = value.reshape(())
        elif all(d is not None for d in shape) and int(np.prod(shape, dtype=np.int64)) == value.size:
            value = value.reshape(shape)
    return value


def load_package(path: str | pathlib.Path, function: str | None = None) -> Package:
    """A package from a ``.mlpackage`` directory on disk (*function*: as :class:`Package` takes it)."""
    root = pathlib.Path(path)
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return Package(files, function)


def run_package(files: Mapping[str, bytes], inputs: Mapping[str, np.ndarray],
                function: str | None = None) -> dict[str, np.ndarray]:
    return Package(files, function).run(inputs)
