// xbench Ascend C twin: vector instructions, "count" form (the first `count` elements of each operand).
// Every API call validates its UB operands, computes in the element type (half and bfloat16_t through float,
// rounded back after each instruction) and counts one vector instruction per 256-byte repeat.
#ifndef XBENCH_TWIN_VECTOR_H
#define XBENCH_TWIN_VECTOR_H

#include "tensor.h"

namespace xbench_twin {

template <class T, class... Allowed> constexpr bool one_of_v = (std::is_same_v<T, Allowed> || ...);

inline uint64_t check_count(int64_t count, const char* api) {
    if (count < 0) fail("vector-args", cat(api, ": count ", count, " is negative"));
    return static_cast<uint64_t>(count);
}

// Integer arithmetic wraps (two's complement); float arithmetic is IEEE in Arith<T>.
struct AddF { template <class A> A operator()(A a, A b) const {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) + static_cast<std::make_unsigned_t<A>>(b));
    else return a + b; } };
struct SubF { template <class A> A operator()(A a, A b) const {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) - static_cast<std::make_unsigned_t<A>>(b));
    else return a - b; } };
struct MulF { template <class A> A operator()(A a, A b) const {
    if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<std::make_unsigned_t<A>>(a) * static_cast<std::make_unsigned_t<A>>(b));
    else return a * b; } };
struct DivF { template <class A> A operator()(A a, A b) const { return a / b; } };
struct MaxF { template <class A> A operator()(A a, A b) const { return a > b ? a : b; } };
struct MinF { template <class A> A operator()(A a, A b) const { return a < b ? a : b; } };
struct AndF { template <class A> A operator()(A a, A b) const { return static_cast<A>(a & b); } };
struct OrF { template <class A> A operator()(A a, A b) const { return static_cast<A>(a | b); } };

template <class T, class F>
void binary(Op op, const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& a,
            const AscendC::LocalTensor<T>& b, int64_t count, F f) {
    const uint64_t n = check_count(count, api);
    if (n == 0) return;  // count 0 is a no-op on Atlas A2
    const uint64_t nb = n * sizeof(T);
    T* d = ub_operand(dst, nb, api, "dst");
    const T* x = ub_operand(a, nb, api, "src0");
    const T* y = ub_operand(b, nb, api, "src1");
    for (uint64_t i = 0; i < n; ++i) d[i] = static_cast<T>(f(static_cast<Arith<T>>(x[i]), static_cast<Arith<T>>(y[i])));
    count_vec(op, vec_repeats<T>(n), n);
}

template <class T, class F>
void unary(Op op, const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
           int64_t count, F f) {
    const uint64_t n = check_count(count, api);
    if (n == 0) return;
    const uint64_t nb = n * sizeof(T);
    T* d = ub_operand(dst, nb, api, "dst");
    const T* x = ub_operand(src, nb, api, "src");
    for (uint64_t i = 0; i < n; ++i) d[i] = static_cast<T>(f(static_cast<Arith<T>>(x[i])));
    count_vec(op, vec_repeats<T>(n), n);
}

template <class T> T radd(T a, T b) { return static_cast<T>(static_cast<Arith<T>>(a) + static_cast<Arith<T>>(b)); }

template <class T> T index_as(uint64_t idx) {
    T v;
    if constexpr (sizeof(T) == 2) { uint16_t b = static_cast<uint16_t>(idx); std::memcpy(&v, &b, 2); }
    else { uint32_t b = static_cast<uint32_t>(idx); std::memcpy(&v, &b, 4); }
    return v;
}

// Minimum sharedTmpBuffer elements ReduceMax/ReduceMin need (count form), after the public formula.
template <class T> uint64_t reduce_maxmin_tmp_elems(uint64_t count, bool calIndex) {
    const uint64_t epr = 256 / sizeof(T), epb = 32 / sizeof(T);
    const uint64_t first = ceil_div(count, epr);
    const uint64_t iter1 = first * 2;
    if (!calIndex) return round_up(iter1, epb);
    const uint64_t start2 = round_up(iter1, epb);
    const uint64_t iter2 = ceil_div(iter1, epr) * 2;
    const uint64_t end2 = round_up(iter2, epb);
    if (iter2 <= 2) return start2 + end2;
    const uint64_t iter3 = ceil_div(iter2, epr) * 2;
    return start2 + end2 + round_up(iter3, epb);
}

template <class T, bool IsMax>
void reduce_maxmin(Op op, const char* api, const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<T>& src,
                   const AscendC::LocalTensor<T>& tmp, int64_t count, bool calIndex) {
    static_assert(one_of_v<T, half, float>, "ReduceMax/ReduceMin on Atlas A2 support half and float");
    const uint64_t n = check_count(count, api);
    if (n == 0) return;
    const uint64_t epr = 256 / sizeof(T);
    if constexpr (sizeof(T) == 2) {
        if (calIndex && n > 65536) {
            fail("vector-args", cat(api, ": with half data the index must fit in 16 bits; count ", n, " > 65536"));
        }
    }
    const T* x = ub_operand(src, n * sizeof(T), api, "src");
    const uint64_t need = reduce_maxmin_tmp_elems<T>(n, calIndex);
    const uint64_t room = ub_room(tmp);
    if (room < need * sizeof(T)) {
        fail("reduce-workspace", cat(api, "(count=", n, ", calIndex=", calIndex ? "true" : "false",
                                     ") needs a sharedTmpBuffer of at least ", need, " ", type_name<T>(),
                                     " elements (", need * sizeof(T), " bytes); the tensor passed has ", room,
                                     " bytes of buffer from its start"));
    }
    T* w = ub_operand(tmp, need * sizeof(T), api, "sharedTmpBuffer");
    T* d = ub_operand(dst, (calIndex ? 2 : 1) * sizeof(T), api, "dst", static_cast<uint32_t>((calIndex ? 2 : 1) * sizeof(T)));
    Arith<T> best = static_cast<Arith<T>>(x[0]);
    uint64_t at = 0;
    for (uint64_t r = 0; r * epr < n; ++r) {
        uint64_t lo = r * epr, hi = std::min(n, lo + epr), ri = lo;
        Arith<T> rb = static_cast<Arith<T>>(x[lo]);
        for (uint64_t i = lo + 1; i < hi; ++i) {
            Arith<T> v = static_cast<Arith<T>>(x[i]);
            if (IsMax ? v > rb : v < rb) { rb = v; ri = i; }
        }
        w[2 * r] = static_cast<T>(rb);  // first round leaves (value, in-repeat index) pairs in the work area
        w[2 * r + 1] = index_as<T>(ri - lo);
        if (IsMax ? rb > best : rb < best) { best = rb; at = ri; }
    }
    d[0] = static_cast<T>(best);
    if (calIndex) d[1] = index_as<T>(at);
    uint64_t reps = ceil_div(n, epr), total = reps, m = 2 * reps;
    while (m > 2) { reps = ceil_div(m, epr); total += reps; m = 2 * reps; }
    count_vec(op, total, n);
}

}  // namespace xbench_twin

namespace AscendC {

#define XBENCH_TWIN_BINARY(NAME, FUNCTOR, ...)                                                                  \
    template <typename T>                                                                                       \
    __aicore__ inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, \
                                const int32_t& count) {                                                         \
        static_assert(xbench_twin::one_of_v<T, __VA_ARGS__>, #NAME " on Atlas A2 supports " #__VA_ARGS__);    \
        xbench_twin::binary(xbench_twin::Op::NAME, #NAME, dst, src0, src1, count, xbench_twin::FUNCTOR{});      \
    }
XBENCH_TWIN_BINARY(Add, AddF, int16_t, half, int32_t, float)
XBENCH_TWIN_BINARY(Sub, SubF, int16_t, half, int32_t, float)
XBENCH_TWIN_BINARY(Mul, MulF, int16_t, half, int32_t, float)
XBENCH_TWIN_BINARY(Div, DivF, half, float)
XBENCH_TWIN_BINARY(Max, MaxF, int16_t, half, int32_t, float)
XBENCH_TWIN_BINARY(Min, MinF, int16_t, half, int32_t, float)
XBENCH_TWIN_BINARY(And, AndF, int16_t, uint16_t)
XBENCH_TWIN_BINARY(Or, OrF, int16_t, uint16_t)
#undef XBENCH_TWIN_BINARY

#define XBENCH_TWIN_SCALAR(NAME, FUNCTOR)                                                                       \
    template <typename T, bool isSetMask = true>                                                                \
    __aicore__ inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue,     \
                                const int32_t& count) {                                                         \
        static_assert(xbench_twin::one_of_v<T, int16_t, half, int32_t, float>,                                  \
                      #NAME " on Atlas A2 supports int16_t, half, int32_t, float");                             \
        const auto s = static_cast<xbench_twin::Arith<T>>(scalarValue);                                         \
        xbench_twin::unary(xbench_twin::Op::NAME, #NAME, dst, src, count,                                       \
                           [s](xbench_twin::Arith<T> a) { return xbench_twin::FUNCTOR{}(a, s); });             \
    }
XBENCH_TWIN_SCALAR(Adds, AddF)
XBENCH_TWIN_SCALAR(Muls, MulF)
XBENCH_TWIN_SCALAR(Maxs, MaxF)
XBENCH_TWIN_SCALAR(Mins, MinF)
#undef XBENCH_TWIN_SCALAR

#define XBENCH_TWIN_UNARY(NAME, EXPR, ...)                                                                      \
    template <typename T>                                                                                       \
    __aicore__ inline void NAME(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count) {   \
        static_assert(xbench_twin::one_of_v<T, __VA_ARGS__>, #NAME " on Atlas A2 supports " #__VA_ARGS__);    \
        using A = xbench_twin::Arith<T>;                                                                        \
        xbench_twin::unary(xbench_twin::Op::NAME, #NAME, dst, src, count, [](A x) -> A { return EXPR; });      \
    }
XBENCH_TWIN_UNARY(Exp, std::exp(x), half, float)
XBENCH_TWIN_UNARY(Ln, std::log(x), half, float)
XBENCH_TWIN_UNARY(Abs, std::fabs(x), half, float)
XBENCH_TWIN_UNARY(Sqrt, std::sqrt(x), half, float)
XBENCH_TWIN_UNARY(Rsqrt, A(1) / std::sqrt(x), half, float)
XBENCH_TWIN_UNARY(Reciprocal, A(1) / x, half, float)
XBENCH_TWIN_UNARY(Relu, x > A(0) ? x : A(0), half, int32_t, float)
XBENCH_TWIN_UNARY(Not, static_cast<A>(~x), int16_t, uint16_t)
#undef XBENCH_TWIN_UNARY

template <typename T>
__aicore__ inline void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count) {
    static_assert(xbench_twin::one_of_v<T, int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float>,
                  "Duplicate on Atlas A2 supports int16_t, uint16_t, half, bfloat16_t, int32_t, uint32_t, float");
    using namespace xbench_twin;
    const uint64_t n = check_count(count, "Duplicate");
    if (n == 0) return;
    T* d = ub_operand(dst, n * sizeof(T), "Duplicate", "dst");
    for (uint64_t i = 0; i < n; ++i) d[i] = scalarValue;
    count_vec(Op::Duplicate, vec_repeats<T>(n), n);
}

// dst = src * scalar + dst (computed in float, rounded once to T).
template <typename T, typename U>
__aicore__ inline void Axpy(const LocalTensor<T>& dst, const LocalTensor<U>& src, const U& scalarValue,
                            const int32_t& count) {
    static_assert((std::is_same_v<T, U> && xbench_twin::one_of_v<T, half, float>) ||
                      (std::is_same_v<T, float> && std::is_same_v<U, half>),
                  "Axpy on Atlas A2 supports (dst, src) = (half, half), (float, float), (float, half)");
    using namespace xbench_twin;
    const uint64_t n = check_count(count, "Axpy");
    if (n == 0) return;
    T* d = ub_operand(dst, n * sizeof(T), "Axpy", "dst");
    const U* x = ub_operand(src, n * sizeof(U), "Axpy", "src");
    const float s = static_cast<float>(scalarValue);
    for (uint64_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<float>(x[i]) * s + static_cast<float>(d[i]));
    count_vec(Op::Axpy, ceil_div(n * std::max(sizeof(T), sizeof(U)), 256), n);
}

// ------------------------------------------------------------------------------------------ Cast
namespace xb_cast {
using xbench_twin::one_of_v;
// Atlas A2 pairs (dst <- src), from the public data-type table; int4b_t, int64_t and the int32->half
// dequantisation path are not modelled.
template <class D, class S> constexpr bool supported() {
    return (std::is_same_v<D, half> && one_of_v<S, int8_t, uint8_t, int16_t, float>) ||
           (std::is_same_v<D, float> && one_of_v<S, int16_t, half, bfloat16_t, int32_t, float>) ||
           (std::is_same_v<D, int8_t> && std::is_same_v<S, half>) ||
           (std::is_same_v<D, uint8_t> && std::is_same_v<S, half>) ||
           (std::is_same_v<D, int16_t> && one_of_v<S, half, int32_t, float>) ||
           (std::is_same_v<D, int32_t> && one_of_v<S, half, bfloat16_t, float>) ||
           (std::is_same_v<D, bfloat16_t> && std::is_same_v<S, float>);
}
// Which rounding modes the pair accepts (bit i = RoundMode value i).
template <class D, class S> constexpr uint32_t modes() {
    constexpr uint32_t none = 1u << 0, rint = 1u << 1, floor = 1u << 2, ceil = 1u << 3, round = 1u << 4,
                       trunc = 1u << 5, odd = 1u << 6;
    constexpr uint32_t five = rint | floor | ceil | round | trunc;
    if constexpr (std::is_same_v<S, half> && std::is_same_v<D, float>) return none;
    else if constexpr (std::is_same_v<S, bfloat16_t> && std::is_same_v<D, float>) return none;
    else if constexpr (std::is_same_v<S, int16_t> && std::is_same_v<D, float>) return none;
    else if constexpr (one_of_v<S, int8_t, uint8_t> && std::is_same_v<D, half>) return none;
    else if constexpr (std::is_same_v<S, int32_t> && std::is_same_v<D, int16_t>) return none;
    else if constexpr (std::is_same_v<S, int16_t> && std::is_same_v<D, half>) return five | none;
    else if constexpr (std::is_same_v<S, half> && one_of_v<D, int8_t, uint8_t>) return five | none;
    else if constexpr (std::is_same_v<S, int32_t> && std::is_same_v<D, float>) return five | none;
    else if constexpr (std::is_same_v<S, float> && std::is_same_v<D, half>) return five | none | odd;
    else return five;
}
template <class D, class S> D one(S x, RoundMode m) {
    using namespace xbench_twin;
    if constexpr (std::is_same_v<D, half>) return round_to<HalfFmt>(to_double(x), m);
    else if constexpr (std::is_same_v<D, bfloat16_t>) return round_to<Bf16Fmt>(to_double(x), m);
    else if constexpr (std::is_same_v<D, float>) {
        if constexpr (std::is_same_v<S, float>) return static_cast<float>(round_integral(x, m));
        else return round_to<FloatFmt>(to_double(x), m);
    } else if constexpr (std::is_integral_v<S>) {
        return saturate_int<D>(static_cast<double>(x));
    } else {
        return saturate_int<D>(round_integral(to_double(x), m));
    }
}
}  // namespace xb_cast

template <typename T, typename U>
__aicore__ inline void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode,
                            const uint32_t count) {
    static_assert(xb_cast::supported<T, U>(),
                  "Cast: this (dst, src) type pair is not supported on Atlas A2 (see the Cast data-type table)");
    using namespace xbench_twin;
    const char* api = "Cast";
    if (!((xb_cast::modes<T, U>() >> static_cast<int>(roundMode)) & 1u)) {
        fail("cast-round-mode", cat("Cast ", type_name<U>(), " -> ", type_name<T>(), " does not accept ",
                                    round_mode_name(roundMode), " on Atlas A2",
                                    xb_cast::modes<T, U>() == 1u ? " (an exact conversion: use RoundMode::CAST_NONE)"
                                                                 : " (use CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND or CAST_TRUNC)"));
    }
    const uint64_t n = count;
    if (n == 0) return;
    T* d = ub_operand(dst, n * sizeof(T), api, "dst");
    const U* x = ub_operand(src, n * sizeof(U), api, "src");
    for (uint64_t i = 0; i < n; ++i) d[i] = xb_cast::one<T, U>(x[i], roundMode);
    count_vec(Op::Cast, ceil_div(n * std::max(sizeof(T), sizeof(U)), 256), n);
}

// ------------------------------------------------------------------------------------------ reductions
// ReduceSum (count form, Atlas A2): pairwise tree inside each 256-byte repeat, repeats summed in order,
// every addition rounded to T. sharedTmpBuffer is not used by this form.
template <typename T, bool isSetMask = true>
__aicore__ inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                 const LocalTensor<T>& sharedTmpBuffer, const int32_t count) {
    static_assert(xbench_twin::one_of_v<T, half, float>, "ReduceSum on Atlas A2 supports half and float");
    using namespace xbench_twin;
    (void)sharedTmpBuffer;
    const char* api = "ReduceSum";
    const uint64_t n = check_count(count, api);
    if (n == 0) return;
    const uint64_t epr = 256 / sizeof(T);
    const T* x = ub_operand(src, n * sizeof(T), api, "src");
    T* d = ub_operand(dst, sizeof(T), api, "dst", sizeof(T));
    T lane[128];
    T total = static_cast<T>(0);
    for (uint64_t r = 0; r * epr < n; ++r) {
        const uint64_t lo = r * epr, hi = std::min(n, lo + epr);
        for (uint64_t i = 0; i < epr; ++i) lane[i] = lo + i < hi ? x[lo + i] : static_cast<T>(0);
        for (uint64_t w = epr; w > 1; w /= 2) {
            for (uint64_t i = 0; i < w / 2; ++i) lane[i] = radd(lane[2 * i], lane[2 * i + 1]);
        }
        total = r == 0 ? lane[0] : radd(total, lane[0]);
    }
    d[0] = total;
    uint64_t reps = ceil_div(n, epr), all = reps, m = reps;
    while (m > 1) { reps = ceil_div(m, epr); all += reps; m = reps; }
    count_vec(Op::ReduceSum, all, n);
}

// ReduceMax / ReduceMin: dst[0] = the extreme value; with calIndex dst[1] holds its index (first
// occurrence) as the bits of an unsigned integer of sizeof(T) bytes: read it with
// `auto v = dst.GetValue(1); uint32_t i = *reinterpret_cast<uint16_t*>(&v);` for half (uint32_t for float).
template <typename T>
__aicore__ inline void ReduceMax(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                 const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex = 0) {
    xbench_twin::reduce_maxmin<T, true>(xbench_twin::Op::ReduceMax, "ReduceMax", dst, src, sharedTmpBuffer, count,
                                        calIndex);
}
template <typename T>
__aicore__ inline void ReduceMin(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                 const LocalTensor<T>& sharedTmpBuffer, const int32_t count, bool calIndex = 0) {
    xbench_twin::reduce_maxmin<T, false>(xbench_twin::Op::ReduceMin, "ReduceMin", dst, src, sharedTmpBuffer, count,
                                         calIndex);
}

}  // namespace AscendC

// ------------------------------------------------------------------------------------------ compare / select
namespace xbench_twin {

// Compare / Compares write one bit per element, least significant bit first. Only whole 256-byte repeats
// are computed: the bits of a tail beyond count * sizeof(T) rounded down to 256 bytes stay as they were.
template <class T, class U, class Src1>
void compare_impl(Op op, const char* api, const AscendC::LocalTensor<U>& dst, const AscendC::LocalTensor<T>& src0,
                  const Src1& src1, AscendC::CMPMODE cmpMode, uint32_t count) {
    using AscendC::CMPMODE;
    if (std::is_same_v<T, int32_t> && cmpMode != CMPMODE::EQ) {
        fail("vector-args", cat(api, " on int32_t supports only CMPMODE::EQ on Atlas A2"));
    }
    const uint64_t n = static_cast<uint64_t>(count) * sizeof(T) / 256 * 256 / sizeof(T);
    if (n < count) counters().compare_truncated += 1;
    if (n == 0) return;
    const T* x = ub_operand(src0, n * sizeof(T), api, "src0");
    const T* y = nullptr;
    if constexpr (!std::is_same_v<Src1, T>) y = ub_operand(src1, n * sizeof(T), api, "src1");
    auto* d = reinterpret_cast<uint8_t*>(ub_operand(dst, n / 8, api, "dst"));
    for (uint64_t i = 0; i < n; i += 8) {
        uint8_t bits = 0;
        for (uint64_t k = 0; k < 8; ++k) {
            const auto a = static_cast<Arith<T>>(x[i + k]);
            Arith<T> b;
            if constexpr (std::is_same_v<Src1, T>) b = static_cast<Arith<T>>(src1);
            else b = static_cast<Arith<T>>(y[i + k]);
            bool r = false;
            switch (cmpMode) {
                case CMPMODE::LT: r = a < b; break;
                case CMPMODE::GT: r = a > b; break;
                case CMPMODE::EQ: r = a == b; break;
                case CMPMODE::LE: r = a <= b; break;
                case CMPMODE::GE: r = a >= b; break;
                case CMPMODE::NE: r = a != b; break;
            }
            bits |= static_cast<uint8_t>(r) << k;
        }
        d[i / 8] = bits;
    }
    count_vec(op, vec_repeats<T>(n), n);
}

}  // namespace xbench_twin

namespace AscendC {

template <typename T, typename U>
__aicore__ inline void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
                               CMPMODE cmpMode, uint32_t count) {
    static_assert(xbench_twin::one_of_v<T, half, float, int32_t>, "Compare on Atlas A2 supports half, float, int32_t");
    static_assert(xbench_twin::one_of_v<U, int8_t, uint8_t>, "Compare writes its bit mask to int8_t or uint8_t");
    xbench_twin::compare_impl(xbench_twin::Op::Compare, "Compare", dst, src0, src1, cmpMode, count);
}

// Compares: src0 against a scalar.
template <typename T, typename U>
__aicore__ inline void Compares(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar,
                                CMPMODE cmpMode, uint32_t count) {
    static_assert(xbench_twin::one_of_v<T, half, float, int32_t>, "Compares on Atlas A2 supports half, float, int32_t");
    static_assert(std::is_same_v<U, uint8_t>, "Compares writes its bit mask to uint8_t on Atlas A2");
    xbench_twin::compare_impl(xbench_twin::Op::Compares, "Compares", dst, src0, src1Scalar, cmpMode, count);
}

}  // namespace AscendC

namespace xbench_twin {

template <class T, class U, class Src1>
void select_impl(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<U>& mask,
                 const AscendC::LocalTensor<T>& src0, Src1 src1, AscendC::SELMODE mode, uint32_t count, bool scalar) {
    static_assert(one_of_v<T, half, float>, "Select on Atlas A2 supports half and float");
    static_assert(one_of_v<U, uint8_t, uint16_t, uint32_t, uint64_t>, "Select's selMask is uint8/16/32/64");
    using AscendC::SELMODE;
    const char* api = "Select";
    if (scalar != (mode == SELMODE::VSEL_TENSOR_SCALAR_MODE)) {
        fail("vector-args", scalar ? "Select with a scalar src1 needs SELMODE::VSEL_TENSOR_SCALAR_MODE"
                                   : "Select with a tensor src1 needs SELMODE::VSEL_CMPMASK_SPR or VSEL_TENSOR_TENSOR_MODE");
    }
    auto& c = ctx();
    if (mode != SELMODE::VSEL_CMPMASK_SPR && c.ub_in_use + 8192 > c.cfg->ub_bytes) {
        fail("ub-capacity", cat("Select in tensor-scalar or tensor-tensor mode needs 8192 bytes of Unified Buffer left"
                                " free for its temporary data, but InitBuffer has carved ", c.ub_in_use, " of ",
                                c.cfg->ub_bytes, " bytes; leave 8 KiB unallocated."));
    }
    const uint64_t n = count;
    if (n == 0) return;
    const uint64_t epr = 256 / sizeof(T);
    T* d = ub_operand(dst, n * sizeof(T), api, "dst");
    const T* x = ub_operand(src0, n * sizeof(T), api, "src0");
    const uint64_t mask_bytes = mode == SELMODE::VSEL_CMPMASK_SPR ? epr / 8 : ceil_div(n, 8);
    const auto* m = reinterpret_cast<const uint8_t*>(ub_operand(mask, mask_bytes, api, "selMask"));
    const T* y = nullptr;
    if constexpr (!std::is_same_v<Src1, T>) y = ub_operand(src1, n * sizeof(T), api, "src1");
    for (uint64_t i = 0; i < n; ++i) {
        uint64_t bit = mode == SELMODE::VSEL_CMPMASK_SPR ? i % epr : i;
        bool take0 = (m[bit / 8] >> (bit % 8)) & 1u;
        T other;
        if constexpr (std::is_same_v<Src1, T>) other = src1;
        else other = y[i];
        d[i] = take0 ? x[i] : other;
    }
    count_vec(Op::Select, vec_repeats<T>(n), n);
}

}  // namespace xbench_twin

namespace AscendC {

// Select: where the selMask bit is 1 take src0, else src1 (bits least significant first).
template <typename T, typename U>
__aicore__ inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                              const LocalTensor<T>& src1, SELMODE selMode, uint32_t count) {
    xbench_twin::select_impl<T, U, const LocalTensor<T>&>(dst, selMask, src0, src1, selMode, count, false);
}
template <typename T, typename U>
__aicore__ inline void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
                              T src1, SELMODE selMode, uint32_t count) {
    xbench_twin::select_impl<T, U, T>(dst, selMask, src0, src1, selMode, count, true);
}

}  // namespace AscendC

#endif  // XBENCH_TWIN_VECTOR_H
