// xbench Ascend C twin: the launcher. Runs blocks 0..blockDim-1 on host threads and collects counters.
#ifndef XBENCH_TWIN_LAUNCH_H
#define XBENCH_TWIN_LAUNCH_H

#include <atomic>
#include <thread>
#include <memory>

#include "tensor.h"

namespace xbench_twin {

// Kernel parameters are GM pointers (GM_ADDR) or trivially copyable structs passed by value;
// args[i] points at the buffer for a pointer parameter, at the struct's bytes for a by-value one.
template <class A> A arg_cast(void* p) {
    if constexpr (std::is_pointer_v<A>) {
        return reinterpret_cast<A>(p);
    } else {
        static_assert(std::is_trivially_copyable_v<A>, "by-value kernel parameters must be trivially copyable");
        A v;
        std::memcpy(&v, p, sizeof(A));
        return v;
    }
}

template <class... A, size_t... I>
void invoke(void (*fn)(A...), void** args, std::index_sequence<I...>) {
    fn(arg_cast<A>(args[I])...);
}

template <class A> constexpr uint64_t by_value_size() {
    if constexpr (std::is_pointer_v<A>) return 0;
    else return sizeof(A);
}

inline void set_status(XbenchTwinStatus* st, int64_t block, const std::string& rule, const std::string& msg) {
    st->block = block;
    std::snprintf(st->rule, sizeof(st->rule), "%s", rule.c_str());
    std::snprintf(st->message, sizeof(st->message), "%s", msg.c_str());
}

inline void finish_counters(BlockCtx& c) {
    c.c.num_buffers = c.inits.size();
    for (size_t i = 0; i < c.inits.size() && i < XBENCH_TWIN_MAX_BUFFERS; ++i) {
        const auto& r = c.inits[i];
        c.c.buffer_bytes[i] = r.bytes;
        c.c.buffer_num[i] = r.num;
        c.c.buffer_len[i] = r.len;
        c.c.buffer_pos[i] = static_cast<uint64_t>(r.pos);
        c.c.buffer_kind[i] = static_cast<uint64_t>(r.kind);
        c.c.buffer_addr[i] = r.addr;
    }
}

// Return codes: 0 ok, 1 a hardware rule was broken, 2 the kernel threw something else, 3 bad launch arguments.
template <class... A>
int launch(void (*fn)(A...), const char* name, uint32_t blockDim, void** args, const uint64_t* argBytes,
           uint32_t nargs, const XbenchTwinConfig* cfg, XbenchTwinCounters* out, XbenchTwinStatus* st) {
    set_status(st, -1, "", "");
    constexpr uint32_t arity = sizeof...(A);
    if (nargs != arity) {
        set_status(st, -1, "launch-args", cat(name, " takes ", arity, " arguments; the launch passed ", nargs));
        return 3;
    }
    if (blockDim == 0) {
        set_status(st, -1, "launch-args", cat(name, ": blockDim must be at least 1"));
        return 3;
    }
    constexpr uint64_t sizes[] = {by_value_size<A>()..., 0};
    for (uint32_t i = 0; i < arity; ++i) {
        if (sizes[i] != 0 && (args[i] == nullptr || argBytes[i] != sizes[i])) {
            set_status(st, -1, "launch-args", cat(name, ": argument ", i, " is a struct of ", sizes[i],
                                                  " bytes passed by value; the launch passed ", argBytes[i], " bytes"));
            return 3;
        }
    }
    std::vector<GmRegion> regions;
    for (uint32_t i = 0; i < arity; ++i) {
        if (sizes[i] == 0 && args[i] != nullptr) {
            regions.push_back(GmRegion{static_cast<const uint8_t*>(args[i]), argBytes[i], cat("kernel argument ", i)});
        }
    }
    std::vector<uint8_t> sys_ws(std::max<uint64_t>(cfg->sys_workspace_bytes, 32), 0);
    regions.push_back(GmRegion{sys_ws.data(), sys_ws.size(), "the system workspace"});

    struct BlockError {
        bool set = false;
        int code = 0;
        std::string rule, message;
    };
    std::vector<BlockError> errors(blockDim);
    std::atomic<uint32_t> next{0};
    std::atomic<bool> stop{false};
    auto worker = [&]() {
        for (;;) {
            uint32_t b = next.fetch_add(1);
            if (b >= blockDim || stop.load()) break;
            BlockCtx c;
            c.block = b;
            c.nblocks = blockDim;
            c.cfg = cfg;
            c.ub.assign(cfg->ub_bytes, static_cast<uint8_t>(cfg->ub_fill_byte));
            c.gm = &regions;
            c.sys_workspace = sys_ws.data();
            g_ctx = &c;
            try {
                invoke(fn, args, std::index_sequence_for<A...>{});
            } catch (const TwinError& e) {
                errors[b] = BlockError{true, 1, e.rule, e.message};
                stop.store(true);
            } catch (const std::exception& e) {
                errors[b] = BlockError{true, 2, "kernel-exception", e.what()};
                stop.store(true);
            } catch (...) {
                errors[b] = BlockError{true, 2, "kernel-exception", "the kernel threw a non-standard exception"};
                stop.store(true);
            }
            g_ctx = nullptr;
            finish_counters(c);
            out[b] = c.c;
        }
    };
    uint64_t want = cfg->num_threads ? cfg->num_threads : std::max(1u, std::thread::hardware_concurrency());
    uint32_t nthreads = static_cast<uint32_t>(std::min<uint64_t>(want, blockDim));
    std::vector<std::thread> pool;
    for (uint32_t t = 0; t < nthreads; ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
    // Blocks are claimed in increasing order, so every block below a failing one has run: the lowest
    // failing index is the same whatever the thread timing.
    for (uint32_t b = 0; b < blockDim; ++b) {
        if (errors[b].set) {
            set_status(st, b, errors[b].rule, errors[b].message);
            return errors[b].code;
        }
    }
    return 0;
}

}  // namespace xbench_twin

// Host entry the runner calls through ctypes. Write it after the kernel's definition:
//     #ifdef XBENCH_TWIN
//     XBENCH_TWIN_LAUNCH(add_custom)
//     #endif
#define XBENCH_TWIN_LAUNCH(kernel)                                                                              \
    extern "C" int xbench_launch_##kernel(uint32_t blockDim, void** args, const uint64_t* argBytes,             \
                                          uint32_t nargs, const XbenchTwinConfig* cfg,                          \
                                          XbenchTwinCounters* counters, XbenchTwinStatus* status) {             \
        return ::xbench_twin::launch(&kernel, #kernel, blockDim, args, argBytes, nargs, cfg, counters, status); \
    }

// Runtime description the runner reads to lay out its ctypes structures (weak: one copy per library).
extern "C" __attribute__((weak)) int xbench_twin_abi_version() { return XBENCH_TWIN_ABI; }
extern "C" __attribute__((weak)) uint64_t xbench_twin_counters_size() { return sizeof(XbenchTwinCounters); }
extern "C" __attribute__((weak)) uint64_t xbench_twin_config_size() { return sizeof(XbenchTwinConfig); }
extern "C" __attribute__((weak)) uint64_t xbench_twin_max_buffers() { return XBENCH_TWIN_MAX_BUFFERS; }
extern "C" __attribute__((weak)) uint64_t xbench_twin_num_ops() { return XBENCH_TWIN_NUM_OPS; }
extern "C" __attribute__((weak)) const char* xbench_twin_counter_names() {
#define XBENCH_TWIN_NAME_(n) #n ","
    return XBENCH_TWIN_SCALAR_COUNTERS(XBENCH_TWIN_NAME_);
#undef XBENCH_TWIN_NAME_
}
extern "C" __attribute__((weak)) const char* xbench_twin_op_names() {
#define XBENCH_TWIN_NAME_(n) #n ","
    return XBENCH_TWIN_OPS(XBENCH_TWIN_NAME_);
#undef XBENCH_TWIN_NAME_
}

#endif  // XBENCH_TWIN_LAUNCH_H
