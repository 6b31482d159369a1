// Runs a compiled model bundle on the device: the folder `mobile-ep convert --compile --ep coreml` writes
// next to <model>.coreml.compiled.onnx (<model>.coreml.compiled/). Its plan.json (format
// "mobile-ep-plan/1") lists the steps in order:
//
//   {"kind": "onnx", "file": "segment_0.onnx", "inputs": [names], "outputs": [names]}
//       a CPU segment, run with an ONNX Runtime session;
//   {"kind": "partition", "backend": "coreml", "file": "coreml_0.mlpackage", "inputs": [specs], ...}
//       a partition, run with Core ML (CoreMLPartition).
//
// Values pass between steps by name. This is exactly what `mobile_ep.runtime.run_compiled` does on the
// host with onnxruntime and the Core ML emulator.

import CoreML
import Foundation
import onnxruntime_objc

public final class CompiledModelRunner {
    public let plan: Plan
    private let steps: [Step]

    enum Step {
        case onnx(session: ORTSession, inputs: [String], outputs: [String])
        case coreml(partition: CoreMLPartition)
    }

    /// Loads every step of the bundle at `bundle` (a folder holding plan.json). `computeUnits`
    /// overrides the units each partition was compiled for; `sessionOptions` configure the CPU segments.
    public init(bundle: URL, computeUnits: MLComputeUnits? = nil, sessionOptions: ORTSessionOptions? = nil,
                environment: ORTEnv? = nil) throws {
        let data = try Data(contentsOf: bundle.appendingPathComponent("plan.json"))
        plan = try JSONDecoder().decode(Plan.self, from: data)
        guard plan.format == "mobile-ep-plan/1" else {
            throw MobileEPError.invalidBundle("plan format \(plan.format); this adapter reads mobile-ep-plan/1")
        }
        let env = try environment ?? ORTEnv(loggingLevel: ORTLoggingLevel.warning)
        steps = try plan.steps.map { (step: Plan.Step) throws -> Step in
            let url = bundle.appendingPathComponent(step.file)
            switch step.kind {
            case "onnx":
                let session = try ORTSession(env: env, modelPath: url.path, sessionOptions: sessionOptions)
                return .onnx(session: session, inputs: step.inputs.map(\.name), outputs: step.outputs.map(\.name))
            case "partition" where step.backend == "coreml":
                return .coreml(partition: try CoreMLPartition(url: url, computeUnits: computeUnits))
            default:
                throw MobileEPError.invalidBundle("step \(step.file): \(step.kind) for backend "
                    + "\(step.backend ?? "?") is not something this adapter runs")
            }
        }
    }

    /// Runs the model: graph inputs by name in, graph outputs by name out.
    public func run(_ inputs: [String: Tensor]) throws -> [String: Tensor] {
        var values = inputs
        for spec in plan.inputs where values[spec.name] == nil {
            throw MobileEPError.missingInput(spec.name)
        }
        for step in steps {
            switch step {
            case let .onnx(session, names, outputNames):
                var feeds: [String: ORTValue] = [:]
                for name in names {
                    guard let tensor = values[name] else { throw MobileEPError.missingInput(name) }
                    feeds[name] = try tensor.ortValue()
                }
                let results = try session.run(withInputs: feeds, outputNames: Set(outputNames), runOptions: nil)
                for name in outputNames {
                    guard let value = results[name] else { throw MobileEPError.missingInput(name) }
                    values[name] = try Tensor(ortValue: value)
                }
            case let .coreml(partition):
                for (name, tensor) in try partition.predict(values) {
                    values[name] = tensor
                }
            }
        }
        var outputs: [String: Tensor] = [:]
        for spec in plan.outputs {
            guard let tensor = values[spec.name] else { throw MobileEPError.missingInput(spec.name) }
            outputs[spec.name] = tensor
        }
        return outputs
    }
}

// MARK: - plan.json

public struct Plan: Decodable {
    public struct Spec: Decodable {
        public let name: String
        public let dtype: String?
        public let shape: [Int?]?

        public init(from decoder: Decoder) throws {
            // CPU steps list bare names; partitions and the model list {"name", "dtype", "shape"}.
            if let name = try? decoder.singleValueContainer().decode(String.self) {
                self.name = name
                dtype = nil
                shape = nil
                return
            }
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            dtype = try container.decodeIfPresent(String.self, forKey: .dtype)
            shape = try container.decodeIfPresent([Int?].self, forKey: .shape)
        }

        enum CodingKeys: String, CodingKey { case name, dtype, shape }
    }

    public struct Step: Decodable {
        public let kind: String
        public let file: String
        public let inputs: [Spec]
        public let outputs: [Spec]
        public let backend: String?
        public let format: String?
        public let metadata: [String: String]?
    }

    public let format: String
    public let model: String
    public let inputs: [Spec]
    public let outputs: [Spec]
    public let steps: [Step]
}

// MARK: - ORTValue

extension Tensor {
    static let ortTypes: [ElementType: ORTTensorElementDataType] = [
        .float: .float, .int32: .int32, .int64: .int64, .int8: .int8, .uint8: .uInt8,
    ]

    /// An ORTValue sharing a copy of the data (ORT's Objective-C API has no float16, double or bool).
    public func ortValue() throws -> ORTValue {
        guard let elementType = Tensor.ortTypes[type] else {
            throw MobileEPError.unsupported("\(type.rawValue) tensors at a CPU segment's boundary")
        }
        return try ORTValue(tensorData: NSMutableData(data: data), elementType: elementType,
                            shape: shape.map { NSNumber(value: $0) })
    }

    public init(ortValue value: ORTValue) throws {
        let info = try value.tensorTypeAndShapeInfo()
        guard let type = Tensor.ortTypes.first(where: { $0.value == info.elementType })?.key else {
            throw MobileEPError.unsupported("ORT element type \(info.elementType.rawValue)")
        }
        let bytes = try value.tensorData()  // ORT's memory: copy it before the ORTValue goes away
        self.init(type: type, shape: info.shape.map { $0.intValue }, data: Data(bytes: bytes.bytes, count: bytes.length))
    }
}
