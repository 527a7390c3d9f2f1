// Test oracle: NVIDIA's occupancy calculator (cuda_occupancy.h from the local CUDA install), driven by stdin.
//
//   occ MAJOR MINOR THREADS_PER_SM REGS_PER_BLOCK REGS_PER_SM SMEM_PER_BLOCK SMEM_PER_SM OPTIN RESERVED
//       THREADS REGS STATIC_SMEM DYNAMIC_SMEM CARVEOUT_MODE CARVEOUT
//     CARVEOUT_MODE 0: driver default; 1: CARVEOUT is a percentage (carveoutConfig);
//     2: CARVEOUT is a number of bytes (passed as the SM's shared-memory preference).
//     prints: status blocks limitingFactors regsLimit smemLimit warpsLimit blocksLimit barriersLimit
//             allocatedRegsPerBlock allocatedSmemPerBlock
//   arch MAJOR MINOR
//     prints: smemGranularity regGranularity maxRegsPerThread subPartitions maxBlocksPerSm configs...
//     where configs are the distinct shared-memory configurations (bytes) the header rounds sizes up to.
#include <cuda_occupancy.h>
#include <climits>
#include <cstdio>
#include <cstring>
#include <set>

int main() {
    char cmd[16];
    while (std::scanf("%15s", cmd) == 1) {
        if (std::strcmp(cmd, "occ") == 0) {
            int major, minor, tpsm, rpb, rpsm, threads, regs, mode;
            long long spb, spsm, optin, reserved, stat, dyn, carve;
            if (std::scanf("%d %d %d %d %d %lld %lld %lld %lld %d %d %lld %lld %d %lld", &major, &minor, &tpsm,
                           &rpb, &rpsm, &spb, &spsm, &optin, &reserved, &threads, &regs, &stat, &dyn, &mode,
                           &carve) != 15) return 2;
            cudaOccDeviceProp prop;
            prop.computeMajor = major;
            prop.computeMinor = minor;
            prop.maxThreadsPerBlock = 1024;
            prop.maxThreadsPerMultiprocessor = tpsm;
            prop.regsPerBlock = rpb;
            prop.regsPerMultiprocessor = rpsm;
            prop.warpSize = 32;
            prop.sharedMemPerBlock = (size_t)spb;
            prop.sharedMemPerMultiprocessor = (size_t)spsm;
            prop.numSms = 1;
            prop.sharedMemPerBlockOptin = (size_t)optin;
            prop.reservedSharedMemPerBlock = (size_t)reserved;
            cudaOccFuncAttributes attr;
            attr.maxThreadsPerBlock = 1024;
            attr.numRegs = regs;
            attr.sharedSizeBytes = (size_t)stat;
            attr.partitionedGCConfig = PARTITIONED_GC_OFF;
            attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
            attr.maxDynamicSharedSizeBytes = (size_t)dyn;
            attr.numBlockBarriers = 1;
            attr.virtualResourceCount = 0;
            cudaOccDeviceState state;
            if (mode == 1) state.carveoutConfig = (int)carve;
            if (mode == 2) prop.sharedMemPerMultiprocessor = (size_t)carve;
            cudaOccResult res;
            std::memset(&res, 0, sizeof(res));
            cudaOccError err = cudaOccMaxActiveBlocksPerMultiprocessor(&res, &prop, &attr, &state, threads,
                                                                       (size_t)dyn);
            std::printf("%d %d %u %d %d %d %d %d %d %zu\n", (int)err, res.activeBlocksPerMultiprocessor,
                        res.limitingFactors, res.blockLimitRegs, res.blockLimitSharedMem, res.blockLimitWarps,
                        res.blockLimitBlocks, res.blockLimitBarriers, res.allocatedRegistersPerBlock,
                        res.allocatedSharedMemPerBlock);
        } else if (std::strcmp(cmd, "arch") == 0) {
            cudaOccDeviceProp prop;
            if (std::scanf("%d %d", &prop.computeMajor, &prop.computeMinor) != 2) return 2;
            int smemGran = 0, regGran = 0, maxRegs = 0, subParts = 0, maxBlocks = 0;
            cudaOccSMemAllocationGranularity(&smemGran, &prop);
            cudaOccRegAllocationGranularity(&regGran, &prop);
            cudaOccRegAllocationMaxPerThread(&maxRegs, &prop);
            cudaOccSubPartitionsPerMultiprocessor(&subParts, &prop);
            cudaOccMaxBlocksPerMultiprocessor(&maxBlocks, &prop);
            std::printf("%d %d %d %d %d", smemGran, regGran, maxRegs, subParts, maxBlocks);
            std::set<size_t> configs;
            for (size_t size = 0; size <= 512 * 1024; size += 128) {
                size_t s = size;
                if (cudaOccAlignUpShmemSizeVoltaPlus(&s, &prop) == CUDA_OCC_SUCCESS) configs.insert(s);
            }
            for (size_t c : configs) std::printf(" %zu", c);
            std::printf("\n");
        } else {
            return 3;
        }
        std::fflush(stdout);
    }
    return 0;
}
