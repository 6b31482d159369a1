// A dense tensor passed between the steps of a compiled model, and its conversions to and from
// MLMultiArray (Core ML partitions). The ONNX Runtime conversions live in CompiledModelRunner.swift.
//
// Element types are named as in the bundle's plan.json and in the partitions' I/O metadata
// (onnx_ir DataType names: FLOAT, FLOAT16, DOUBLE, INT32, INT64, BOOL, INT8, UINT8).

import CoreML
import Foundation

public enum MobileEPError: Error, CustomStringConvertible {
    case invalidBundle(String)
    case invalidModel(String)
    case missingInput(String)
    case unsupported(String)
    case shapeMismatch(String)

    public var description: String {
        switch self {
        case let .invalidBundle(message): return "mobile-ep bundle: \(message)"
        case let .invalidModel(message): return "mobile-ep Core ML partition: \(message)"
        case let .missingInput(name): return "mobile-ep: no value for input '\(name)'"
        case let .unsupported(message): return "mobile-ep: unsupported: \(message)"
        case let .shapeMismatch(message): return "mobile-ep: \(message)"
        }
    }
}

public enum ElementType: String, Codable {
    case float = "FLOAT"
    case float16 = "FLOAT16"
    case double = "DOUBLE"
    case int32 = "INT32"
    case int64 = "INT64"
    case bool = "BOOL"
    case int8 = "INT8"
    case uint8 = "UINT8"

    public var byteSize: Int {
        switch self {
        case .float, .int32: return 4
        case .float16: return 2
        case .double, .int64: return 8
        case .bool, .int8, .uint8: return 1
        }
    }
}

/// A row-major, contiguous, little-endian tensor.
public struct Tensor {
    public var type: ElementType
    public var shape: [Int]
    public var data: Data

    public var count: Int { shape.reduce(1, *) }

    public init(type: ElementType, shape: [Int], data: Data) {
        precondition(data.count == shape.reduce(1, *) * type.byteSize, "tensor data does not match its shape")
        self.type = type
        self.shape = shape
        self.data = data
    }

    public static func float32(_ values: [Float], shape: [Int]) -> Tensor {
        Tensor(type: .float, shape: shape, data: values.withUnsafeBufferPointer { Data(buffer: $0) })
    }

    public static func int64(_ values: [Int64], shape: [Int]) -> Tensor {
        Tensor(type: .int64, shape: shape, data: values.withUnsafeBufferPointer { Data(buffer: $0) })
    }

    /// The values as Float (any element type).
    public func floats() -> [Float] {
        (0..<count).map { Float(element(at: $0)) }
    }

    /// Element i as a Double (exact for every type Core ML computes in).
    public func element(at index: Int) -> Double {
        data.withUnsafeBytes { raw -> Double in
            switch type {
            case .float: return Double(raw.load(fromByteOffset: index * 4, as: Float.self))
            case .float16: return Double(halfToFloat(raw.load(fromByteOffset: index * 2, as: UInt16.self)))
            case .double: return raw.load(fromByteOffset: index * 8, as: Double.self)
            case .int32: return Double(raw.load(fromByteOffset: index * 4, as: Int32.self))
            case .int64: return Double(raw.load(fromByteOffset: index * 8, as: Int64.self))
            case .bool, .uint8: return Double(raw.load(fromByteOffset: index, as: UInt8.self))
            case .int8: return Double(raw.load(fromByteOffset: index, as: Int8.self))
            }
        }
    }

    /// A tensor of `type` holding `values` (converted: integers truncate, bool is value != 0).
    public static func converting(_ values: [Double], to type: ElementType, shape: [Int]) -> Tensor {
        var data = Data(count: values.count * type.byteSize)
        data.withUnsafeMutableBytes { raw in
            for (index, value) in values.enumerated() {
                switch type {
                case .float: raw.storeBytes(of: Float(value), toByteOffset: index * 4, as: Float.self)
                case .float16: raw.storeBytes(of: floatToHalf(Float(value)), toByteOffset: index * 2, as: UInt16.self)
                case .double: raw.storeBytes(of: value, toByteOffset: index * 8, as: Double.self)
                case .int32:
                    raw.storeBytes(of: saturated(value, Int32.min, Int32.max), toByteOffset: index * 4, as: Int32.self)
                case .int64:
                    raw.storeBytes(of: saturated(value, Int64.min, Int64.max), toByteOffset: index * 8, as: Int64.self)
                case .bool: raw.storeBytes(of: UInt8(value != 0 ? 1 : 0), toByteOffset: index, as: UInt8.self)
                case .uint8: raw.storeBytes(of: saturated(value, UInt8.min, UInt8.max), toByteOffset: index, as: UInt8.self)
                case .int8: raw.storeBytes(of: saturated(value, Int8.min, Int8.max), toByteOffset: index, as: Int8.self)
                }
            }
        }
        return Tensor(type: type, shape: shape, data: data)
    }

    public func reshaped(_ shape: [Int]) throws -> Tensor {
        guard shape.reduce(1, *) == count else {
            throw MobileEPError.shapeMismatch("cannot reshape \(self.shape) to \(shape)")
        }
        return Tensor(type: type, shape: shape, data: data)
    }
}

// MARK: - MLMultiArray

extension Tensor {
    /// An MLMultiArray of `dataType` holding this tensor (a scalar becomes shape [1], as Core ML has no
    /// rank-0 features; int64 values must fit int32, which is what Core ML computes in).
    public func multiArray(as dataType: MLMultiArrayDataType) throws -> MLMultiArray {
        let arrayShape = shape.isEmpty ? [1] : shape
        let array = try MLMultiArray(shape: arrayShape.map { NSNumber(value: $0) }, dataType: dataType)
        let strides = array.strides.map { $0.intValue }
        let pointer = array.dataPointer
        for index in 0..<count {
            let value = element(at: index)
            if dataType == .int32 && (value < Double(Int32.min) || value > Double(Int32.max)) {
                throw MobileEPError.unsupported("value \(value) does not fit the int32 Core ML computes in")
            }
            let offset = Tensor.offset(of: index, shape: arrayShape, strides: strides)
            switch dataType {
            case .float32: pointer.storeBytes(of: Float(value), toByteOffset: offset * 4, as: Float.self)
            case .double: pointer.storeBytes(of: value, toByteOffset: offset * 8, as: Double.self)
            case .int32: pointer.storeBytes(of: saturated(value, Int32.min, Int32.max), toByteOffset: offset * 4, as: Int32.self)
            default:
                if #available(iOS 16.0, macOS 13.0, *), dataType == .float16 {
                    pointer.storeBytes(of: floatToHalf(Float(value)), toByteOffset: offset * 2, as: UInt16.self)
                } else {
                    throw MobileEPError.unsupported("MLMultiArray data type \(dataType.rawValue)")
                }
            }
        }
        return array
    }

    /// The MLMultiArray's values (read through its strides, which Core ML may pad) as a tensor of `type`.
    public init(multiArray array: MLMultiArray, as type: ElementType) throws {
        let shape = array.shape.map { $0.intValue }
        let strides = array.strides.map { $0.intValue }
        let count = shape.reduce(1, *)
        let pointer = array.dataPointer
        var values = [Double](repeating: 0, count: count)
        for index in 0..<count {
            let offset = Tensor.offset(of: index, shape: shape, strides: strides)
            switch array.dataType {
            case .float32: values[index] = Double(pointer.load(fromByteOffset: offset * 4, as: Float.self))
            case .double: values[index] = pointer.load(fromByteOffset: offset * 8, as: Double.self)
            case .int32: values[index] = Double(pointer.load(fromByteOffset: offset * 4, as: Int32.self))
            default:
                if #available(iOS 16.0, macOS 13.0, *), array.dataType == .float16 {
                    values[index] = Double(halfToFloat(pointer.load(fromByteOffset: offset * 2, as: UInt16.self)))
                } else {
                    throw MobileEPError.unsupported("MLMultiArray data type \(array.dataType.rawValue)")
                }
            }
        }
        self = Tensor.converting(values, to: type, shape: shape)
    }

    /// The strided offset of the row-major element `index`.
    static func offset(of index: Int, shape: [Int], strides: [Int]) -> Int {
        var rest = index
        var offset = 0
        for axis in stride(from: shape.count - 1, through: 0, by: -1) {
            let dim = max(shape[axis], 1)
            offset += (rest % dim) * strides[axis]
            rest /= dim
        }
        return offset
    }
}

/// `value` truncated toward zero and clamped into [low, high] (NaN becomes 0), so conversions never trap.
func saturated<T: FixedWidthInteger>(_ value: Double, _ low: T, _ high: T) -> T {
    if value.isNaN { return 0 }
    let truncated = value.rounded(.towardZero)
    if truncated <= Double(low) { return low }
    if truncated >= Double(high) { return high }
    return T(truncated)
}

// MARK: - IEEE half precision, without relying on Float16 (unavailable on x86_64 macOS)

func halfToFloat(_ bits: UInt16) -> Float {
    let sign = UInt32(bits & 0x8000) << 16
    let exponent = UInt32(bits & 0x7C00) >> 10
    let mantissa = UInt32(bits & 0x03FF)
    if exponent == 0 {
        if mantissa == 0 { return Float(bitPattern: sign) }
        let value = Float(mantissa) * Float(pow(2.0, -24.0))
        return sign != 0 ? -value : value
    }
    if exponent == 0x1F {
        return Float(bitPattern: sign | 0x7F80_0000 | (mantissa << 13))
    }
    return Float(bitPattern: sign | ((exponent + 112) << 23) | (mantissa << 13))
}

func floatToHalf(_ value: Float) -> UInt16 {
    let bits = value.bitPattern
    let sign = UInt16((bits >> 16) & 0x8000)
    if value.isNaN { return sign | 0x7E00 }
    let magnitude = abs(value)
    if magnitude >= 65520 { return sign | 0x7C00 }  // rounds to infinity
    if magnitude < Float(pow(2.0, -24.0)) / 2 { return sign }
    if magnitude < Float(pow(2.0, -14.0)) {  // subnormal half
        return sign | UInt16((magnitude / Float(pow(2.0, -24.0))).rounded(.toNearestOrEven))
    }
    // normal: round the 23-bit mantissa to 10 bits, to nearest even
    let exponent = Int((bits >> 23) & 0xFF) - 127 + 15
    var mantissa = bits & 0x007F_FFFF
    var half = UInt32(exponent) << 10 | (mantissa >> 13)
    mantissa &= 0x1FFF
    if mantissa > 0x1000 || (mantissa == 0x1000 && (half & 1) == 1) {
        half += 1
    }
    return sign | UInt16(half)
}
