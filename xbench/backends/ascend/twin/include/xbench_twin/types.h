// xbench Ascend C twin: device keywords, element types, enums, and exact conversions with rounding modes.
#ifndef XBENCH_TWIN_TYPES_H
#define XBENCH_TWIN_TYPES_H

#include "runtime.h"

// Device keywords are empty on the host; GM_ADDR is the kernel's byte pointer to global memory.
#ifndef __global__
#define __global__
#endif
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef __ubuf__
#define __ubuf__
#endif
#ifndef __inout_pipe__
#define __inout_pipe__(pipe)
#endif
#ifndef __vector__
#define __vector__
#endif
#ifndef __cube__
#define __cube__
#endif
#ifndef __mix__
#define __mix__(cube, vector)
#endif
#ifndef KERNEL_TASK_TYPE_DEFAULT
#define KERNEL_TASK_TYPE_DEFAULT(type)
#endif
typedef __gm__ uint8_t* GM_ADDR;

// half is IEEE binary16. Vector instructions compute in float and round the result to half,
// as the vector unit keeps every instruction's result in the element type.
using half = _Float16;

// bfloat16_t: the upper 16 bits of an IEEE float; conversion from float rounds to nearest even.
struct bfloat16_t {
    uint16_t bits;

    bfloat16_t() = default;
    bfloat16_t(float f) : bits(from_float_rne(f)) {}  // NOLINT: implicit like the real type
    template <class U, class = std::enable_if_t<std::is_arithmetic_v<U> && !std::is_same_v<U, float>>>
    bfloat16_t(U v) : bfloat16_t(static_cast<float>(v)) {}  // NOLINT
    bfloat16_t(half h) : bfloat16_t(static_cast<float>(h)) {}  // NOLINT
    operator float() const {  // NOLINT
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    static bfloat16_t from_bits(uint16_t b) {
        bfloat16_t r;
        r.bits = b;
        return r;
    }
    static uint16_t from_float_rne(float f) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return static_cast<uint16_t>((u >> 16) | 0x40);
        u += 0x7FFFu + ((u >> 16) & 1u);
        return static_cast<uint16_t>(u >> 16);
    }
};
static_assert(sizeof(bfloat16_t) == 2, "bfloat16_t must be 16 bits");

// Pipes and hardware events for synchronisation. The twin runs each block's instructions in
// program order, so these only count; they never hide or reveal a race.
enum pipe_t : int { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_V2, PIPE_FIX };

namespace AscendC {

enum class TPosition : int32_t {
    GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, SPM, SHM = SPM, TSCM,
    C2PIPE2GM, C2PIPE2LOCAL, MAX,
};
using QuePosition = TPosition;

enum class HardEvent : uint8_t {
    MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M, V_V, MTE3_MTE1,
    MTE1_MTE3, MTE1_V, MTE2_M, M_MTE2, V_MTE1, M_FIX, FIX_M, MTE3_MTE2, MTE2_MTE3, S_V, V_S, S_MTE2,
    MTE2_S, S_MTE3, MTE3_S, MTE2_FIX, FIX_MTE2, FIX_S, M_S, FIX_MTE3, MAX,
};
using TEventID = int8_t;

enum class RoundMode : uint8_t {
    CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD, CAST_HYBRID,
};
enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };
}  // namespace AscendC

// Matmul data formats and batch layouts are global enums, as in the real headers.
enum class CubeFormat { ND = 0, NZ, ZN, ZZ, NN, ND_ALIGN, SCALAR, VECTOR, ROW_MAJOR = ND, COLUMN_MAJOR = 8 };
enum class LayoutMode { NONE = 0, BSNGD, SBNGD, BNGS1S2, NORMAL };

namespace xbench_twin {

inline const char* position_name(int pos) {
    static const char* names[] = {"GM", "A1", "A2", "B1", "B2", "C1", "C2", "CO1", "CO2", "VECIN", "VECOUT",
                                  "VECCALC", "SPM", "TSCM", "C2PIPE2GM", "C2PIPE2LOCAL"};
    return pos >= 0 && pos < 16 ? names[pos] : "?";
}

inline bool is_ub_position(AscendC::TPosition p) {
    return p == AscendC::TPosition::VECIN || p == AscendC::TPosition::VECOUT || p == AscendC::TPosition::VECCALC;
}

template <class T> constexpr const char* type_name() {
    if constexpr (std::is_same_v<T, half>) return "half";
    else if constexpr (std::is_same_v<T, bfloat16_t>) return "bfloat16_t";
    else if constexpr (std::is_same_v<T, float>) return "float";
    else if constexpr (std::is_same_v<T, double>) return "double";
    else if constexpr (std::is_same_v<T, int8_t>) return "int8_t";
    else if constexpr (std::is_same_v<T, uint8_t>) return "uint8_t";
    else if constexpr (std::is_same_v<T, int16_t>) return "int16_t";
    else if constexpr (std::is_same_v<T, uint16_t>) return "uint16_t";
    else if constexpr (std::is_same_v<T, int32_t>) return "int32_t";
    else if constexpr (std::is_same_v<T, uint32_t>) return "uint32_t";
    else if constexpr (std::is_same_v<T, int64_t>) return "int64_t";
    else if constexpr (std::is_same_v<T, uint64_t>) return "uint64_t";
    else return "T";
}

// The type vector instructions compute in: float for the 16-bit float types, the type itself otherwise.
template <class T> struct ArithOf { using type = T; };
template <> struct ArithOf<half> { using type = float; };
template <> struct ArithOf<bfloat16_t> { using type = float; };
template <class T> using Arith = typename ArithOf<T>::type;

template <class T> constexpr bool is_float16_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16_t>;
template <class T> constexpr bool is_fp_v = std::is_floating_point_v<T> || is_float16_v<T>;

inline const char* round_mode_name(AscendC::RoundMode m) {
    static const char* n[] = {"CAST_NONE", "CAST_RINT", "CAST_FLOOR", "CAST_CEIL",
                              "CAST_ROUND", "CAST_TRUNC", "CAST_ODD", "CAST_HYBRID"};
    return n[static_cast<int>(m) & 7];
}

// ---- exact rounding of a double to a float format, with the hardware's rounding modes ----------
// Overflow of a finite value saturates to the largest finite value (the documented default).
struct HalfFmt {
    using T = half;
    static T rne(double v) { return static_cast<half>(v); }
    static uint32_t bits(T x) { uint16_t b; std::memcpy(&b, &x, 2); return b; }
    static T from(uint32_t b) { uint16_t s = static_cast<uint16_t>(b); half h; std::memcpy(&h, &s, 2); return h; }
    static constexpr uint32_t sign = 0x8000u, inf = 0x7C00u, maxf = 0x7BFFu;
};
struct FloatFmt {
    using T = float;
    static T rne(double v) { return static_cast<float>(v); }
    static uint32_t bits(T x) { uint32_t b; std::memcpy(&b, &x, 4); return b; }
    static T from(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
    static constexpr uint32_t sign = 0x80000000u, inf = 0x7F800000u, maxf = 0x7F7FFFFFu;
};
struct Bf16Fmt {
    using T = bfloat16_t;
    // Values reaching here come from float or narrower sources, so the float step is exact.
    static T rne(double v) { return bfloat16_t(static_cast<float>(v)); }
    static uint32_t bits(T x) { return x.bits; }
    static T from(uint32_t b) { return bfloat16_t::from_bits(static_cast<uint16_t>(b)); }
    static constexpr uint32_t sign = 0x8000u, inf = 0x7F80u, maxf = 0x7F7Fu;
};

// Next representable value toward +inf / -inf, on the sign-magnitude bit pattern.
template <class F> uint32_t next_up_bits(uint32_t b) {
    if (b == F::sign) return 1;                    // -0 -> smallest positive
    return (b & F::sign) ? b - 1 : b + 1;
}
template <class F> uint32_t next_down_bits(uint32_t b) {
    if (b == 0) return F::sign | 1;                // +0 -> smallest negative
    return (b & F::sign) ? b + 1 : b - 1;
}
template <class F> double value_of_bits(uint32_t b) {
    uint32_t mag = b & ~F::sign;
    if (mag == F::inf) {
        // The value one step past the largest finite number, for distance comparisons.
        double big = 2.0 * static_cast<double>(static_cast<float>(F::from(F::maxf))) -
                     static_cast<double>(static_cast<float>(F::from(F::maxf - 1)));
        return (b & F::sign) ? -big : big;
    }
    return static_cast<double>(static_cast<float>(F::from(b)));
}

template <class F>
typename F::T round_to(double v, AscendC::RoundMode m) {
    using AscendC::RoundMode;
    if (std::isnan(v) || std::isinf(v)) return F::rne(v);
    const double maxv = value_of_bits<F>(F::maxf);
    if (v > maxv) return F::from(F::maxf);  // saturate finite overflow
    if (v < -maxv) return F::from(F::sign | F::maxf);
    typename F::T r = F::rne(v);
    uint32_t rb = F::bits(r);
    double rv = value_of_bits<F>(rb);
    uint32_t out = rb;
    if (rv != v) {
        uint32_t lo, hi;
        if (rv > v) { hi = rb; lo = next_down_bits<F>(rb); }
        else { lo = rb; hi = next_up_bits<F>(rb); }
        double lov = value_of_bits<F>(lo), hiv = value_of_bits<F>(hi);
        switch (m) {
            case RoundMode::CAST_FLOOR: out = lo; break;
            case RoundMode::CAST_CEIL: out = hi; break;
            case RoundMode::CAST_TRUNC: out = v > 0 ? lo : hi; break;
            case RoundMode::CAST_ROUND: {
                double dl = v - lov, dh = hiv - v;
                out = dl < dh ? lo : dh < dl ? hi : (v > 0 ? hi : lo);
                break;
            }
            case RoundMode::CAST_ODD: out = (lo & 1u) ? lo : hi; break;
            default: out = rb; break;  // CAST_NONE / CAST_RINT: nearest even
        }
    }
    if ((out & ~F::sign) == F::inf) out = (out & F::sign) | F::maxf;  // rounding up past the largest value
    return F::from(out);
}

// Round a double to an integral value with a rounding mode (for float -> int and float -> float).
inline double round_integral(double v, AscendC::RoundMode m) {
    using AscendC::RoundMode;
    switch (m) {
        case RoundMode::CAST_FLOOR: return std::floor(v);
        case RoundMode::CAST_CEIL: return std::ceil(v);
        case RoundMode::CAST_TRUNC: return std::trunc(v);
        case RoundMode::CAST_ROUND: return std::round(v);
        default: return std::nearbyint(v);  // default FE_TONEAREST: ties to even
    }
}

template <class I> I saturate_int(double v) {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return static_cast<I>(v);
}

template <class T> double to_double(T x) {
    if constexpr (is_float16_v<T>) return static_cast<double>(static_cast<float>(x));
    else return static_cast<double>(x);
}

}  // namespace xbench_twin

#endif  // XBENCH_TWIN_TYPES_H
