// One compiled partition: a .mlpackage written by `mobile-ep convert --compile --ep coreml`, loaded with
// the compute units you choose and run on ONNX-named tensors.
//
// The package describes itself: its model metadata entry "com.github.mobile-ep.io" maps each ONNX
// tensor (name, element type, shape) to its Core ML feature. Core ML computes integers as int32 and
// has no bool or rank-0 features, so int64 and bool tensors are converted on the way in and out and
// scalars travel as shape [1] -- the same bridging mobile-ep's host emulator does.

import CoreML
import Foundation

public final class CoreMLPartition {
    public struct Feature: Codable {
        public let name: String
        public let dtype: ElementType
        public let shape: [Int?]?
        public let feature: String
    }

    struct IOMapping: Codable {
        let inputs: [Feature]
        let outputs: [Feature]
    }

    public static let ioMetadataKey = "com.github.mobile-ep.io"
    public static let computeUnitsMetadataKey = "com.github.mobile-ep.compute_units"

    public let model: MLModel
    public let inputs: [Feature]
    public let outputs: [Feature]

    /// Loads a partition from a `.mlpackage` (compiled once and cached in Caches/mobile-ep) or an
    /// already compiled `.mlmodelc` (what Xcode makes of a .mlpackage added to the app target).
    /// `computeUnits` defaults to what the partition was compiled for (`-O compute_units=...`).
    public init(url: URL, computeUnits: MLComputeUnits? = nil) throws {
        let compiledURL = try url.pathExtension == "mlmodelc" ? url : CoreMLPartition.compile(url)
        let configuration = MLModelConfiguration()
        let described = try MLModel(contentsOf: compiledURL)
        let metadata = described.modelDescription.metadata[.creatorDefinedKey] as? [String: String] ?? [:]
        configuration.computeUnits = computeUnits
            ?? CoreMLPartition.computeUnits(named: metadata[CoreMLPartition.computeUnitsMetadataKey] ?? "ALL")
        model = try MLModel(contentsOf: compiledURL, configuration: configuration)
        guard let json = metadata[CoreMLPartition.ioMetadataKey], let data = json.data(using: .utf8) else {
            throw MobileEPError.invalidModel("\(url.lastPathComponent) has no \(CoreMLPartition.ioMetadataKey) metadata "
                + "(not written by mobile-ep)")
        }
        let io = try JSONDecoder().decode(IOMapping.self, from: data)
        inputs = io.inputs
        outputs = io.outputs
    }

    /// mobile-ep's compute_units option values as MLComputeUnits.
    public static func computeUnits(named name: String) -> MLComputeUnits {
        switch name {
        case "CPUOnly": return .cpuOnly
        case "CPUAndGPU": return .cpuAndGPU
        case "CPUAndNeuralEngine":
            if #available(iOS 16.0, macOS 13.0, *) { return .cpuAndNeuralEngine }
            return .all
        default: return .all
        }
    }

    /// Compiles a .mlpackage to .mlmodelc once; the cache key includes the package's modification date.
    static func compile(_ package: URL) throws -> URL {
        let files = FileManager.default
        let caches = try files.url(for: .cachesDirectory, in: .userDomainMask, appropriateFor: nil, create: true)
        let modified = try? files.attributesOfItem(atPath: package.path)[.modificationDate] as? Date
        let stamp = modified.map { String(Int($0.timeIntervalSince1970)) } ?? "0"
        let target = caches.appendingPathComponent("mobile-ep", isDirectory: true)
            .appendingPathComponent("\(package.deletingPathExtension().lastPathComponent)-\(stamp).mlmodelc")
        if files.fileExists(atPath: target.path) { return target }
        let temporary = try MLModel.compileModel(at: package)
        try files.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? files.removeItem(at: target)
        try files.moveItem(at: temporary, to: target)
        return target
    }

    /// Runs the partition: ONNX tensor names in, ONNX tensor names out.
    public func predict(_ values: [String: Tensor]) throws -> [String: Tensor] {
        var features: [String: MLFeatureValue] = [:]
        let description = model.modelDescription
        for spec in inputs {
            guard let tensor = values[spec.name] else { throw MobileEPError.missingInput(spec.name) }
            guard let constraint = description.inputDescriptionsByName[spec.feature]?.multiArrayConstraint else {
                throw MobileEPError.invalidModel("no multi-array input feature '\(spec.feature)'")
            }
            features[spec.feature] = MLFeatureValue(multiArray: try tensor.multiArray(as: constraint.dataType))
        }
        let result = try model.prediction(from: try MLDictionaryFeatureProvider(dictionary: features))
        var outputs: [String: Tensor] = [:]
        for spec in self.outputs {
            guard let array = result.featureValue(for: spec.feature)?.multiArrayValue else {
                throw MobileEPError.invalidModel("the model produced no '\(spec.feature)'")
            }
            var tensor = try Tensor(multiArray: array, as: spec.dtype)
            if let shape = spec.shape, shape.count != tensor.shape.count, shape.allSatisfy({ $0 != nil }) {
                tensor = try tensor.reshaped(shape.map { $0! })  // a scalar output comes back as [1]
            }
            outputs[spec.name] = tensor
        }
        return outputs
    }
}
