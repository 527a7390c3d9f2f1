"""Legacy numba.cuda kernels the lifting tests use: the numba documentation's own (vector add, matmul, the
shared-memory matmul, the heat equation, the shared-memory reduction, a kernel calling a numba.jit function),
the common SIMT forms, and kernels outside them. `# mark: name` comments tag lines the tests expect in messages."""
import math

import numba
from numba import cuda, float32, int32

# ---- the numba documentation's kernels ----------------------------------------------------------------------


@cuda.jit
def vecadd(a, b, c):
    # like threadIdx.x + (blockIdx.x * blockDim.x)
    tid = cuda.grid(1)
    size = len(c)
    if tid < size:
        c[tid] = a[tid] + b[tid]


@cuda.jit
def matmul(A, B, C):
    """Perform square matrix multiplication of C = A * B."""
    i, j = cuda.grid(2)
    if i < C.shape[0] and j < C.shape[1]:
        tmp = 0.0
        for k in range(A.shape[1]):
            tmp += A[i, k] * B[k, j]
        C[i, j] = tmp


TPB = 4


@cuda.jit
def fast_matmul(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x  # blocks per grid
    tmp = float32(0.0)
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


def launch_fast_matmul(A, B, C):
    threadsperblock = (TPB, TPB)
    grid_y_max = max(A.shape[0], B.shape[0])
    grid_x_max = max(A.shape[1], B.shape[1])
    blockspergrid_x = math.ceil(grid_x_max / threadsperblock[0])
    blockspergrid_y = math.ceil(grid_y_max / threadsperblock[1])
    blockspergrid = (blockspergrid_x, blockspergrid_y)
    fast_matmul[blockspergrid, threadsperblock](A, B, C)


@cuda.jit
def solve_heat_equation(buf_0, buf_1, timesteps, k):
    i = cuda.grid(1)
    if i >= len(buf_0):
        return
    grid = cuda.cg.this_grid()
    for step in range(timesteps):
        if (step % 2) == 0:
            data = buf_0
            next_data = buf_1
        else:
            data = buf_1
            next_data = buf_0
        curr_temp = data[i]
        if i == 0:
            next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
        elif i == len(data) - 1:
            next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
        else:
            next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp) + data[i + 1])
        next_data[i] = next_temp
        grid.sync()


NELEM = 16


@cuda.jit
def array_sum(data):
    tid = cuda.threadIdx.x
    size = len(data)
    if tid < size:
        i = cuda.grid(1)
        shr = cuda.shared.array(NELEM, int32)
        shr[tid] = data[i]
        cuda.syncthreads()
        s = 1
        while s < cuda.blockDim.x:
            if tid % (2 * s) == 0:
                shr[tid] += shr[tid + s]
            s *= 2
            cuda.syncthreads()
        if tid == 0:
            data[tid] = shr[tid]


@numba.jit
def business_logic(x, y, z):
    return 4 * z * (2 * x - (4 * y) / 2 * math.pi)


@cuda.jit
def cpu_gpu_compat(res, xarr, yarr, zarr):
    tid = cuda.grid(1)
    if tid < len(xarr):
        res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])


# ---- the common forms ---------------------------------------------------------------------------------------

@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def launch_saxpy(a, x, y, out):
    threads = 32
    blocks = (out.size + threads - 1) // threads
    saxpy[blocks, threads](a, x, y, out)


@cuda.jit
def scaled_exp(x, alpha, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = alpha * math.exp(x[i])


@cuda.jit
def add_bias_2d(x, bias, out):
    row, col = cuda.grid(2)
    if row < x.shape[0] and col < x.shape[1]:
        out[row, col] = max(x[row, col] + bias[col], 0.0)


@cuda.jit
def smooth(x, out):
    i = cuda.grid(1)
    n = x.shape[0]
    if i < n:
        if i == 0 or i == n - 1:
            out[i] = x[i]
        else:
            out[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1]


@cuda.jit
def jacobi(u, out):
    i, j = cuda.grid(2)
    n, m = u.shape
    if i < n and j < m:
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            out[i, j] = u[i, j]
        else:
            out[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


@cuda.jit
def row_sum(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for j in range(x.shape[1]):
            s += x[i, j]
        out[i] = s


@cuda.jit
def row_softmax(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        m = -math.inf
        for j in range(x.shape[1]):
            if x[i, j] > m:
                m = x[i, j]
        s = 0.0
        for j in range(x.shape[1]):
            s += math.exp(x[i, j] - m)
        for j in range(x.shape[1]):
            out[i, j] = math.exp(x[i, j] - m) / s


@cuda.jit
def total(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def scale_in_place(x, factor):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= factor


@cuda.jit
def take(table, idx, out):
    i = cuda.grid(1)
    if i < idx.size:
        out[i] = table[idx[i]]


@cuda.jit
def min_max(x, lo, hi):
    i = cuda.grid(1)
    if i < x.shape[0]:
        a = x[i, 0]
        b = x[i, 0]
        for j in range(1, x.shape[1]):
            a = min(a, x[i, j])
            b = max(b, x[i, j])
        lo[i] = a
        hi[i] = b


@cuda.jit(device=True)
def clamp(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@cuda.jit
def clamp_all(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = clamp(x[i], -0.5, 0.5)


# ---- outside the lifted forms -------------------------------------------------------------------------------

@cuda.jit
def warp_reduce(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, 16)  # mark: shfl
        out[i] = v


@cuda.jit
def histogram(x, bins):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(bins, int(x[i] * 4) % bins.size, 1)  # mark: histogram


@cuda.jit(device=True)
def factorial(n):
    return 1 if n <= 1 else n * factorial(n - 1)  # mark: recursion


@cuda.jit
def factorials(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = factorial(x[i])


@cuda.jit
def unguarded(x, out):
    i = cuda.grid(1)
    out[i] = x[i] + 1  # mark: unguarded


@cuda.jit
def no_barrier(x, out):
    s = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        s[t] = x[i]
    if i < x.size:
        out[i] = s[(t + 1) % 32]  # mark: race


@cuda.jit
def until_small(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        while v > 1.0:  # mark: while
            v = v / 2
        out[i] = v


@cuda.jit
def positives(x, out):
    i = cuda.grid(1)
    if i < x.size and x[i] > 0:
        out[i] = x[i]


@cuda.jit
def writes_input(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]
        x[i] = 0  # mark: writes input


@cuda.jit
def row_cumsum(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for j in range(x.shape[1]):
            s += x[i, j]
            out[i, j] = s


@cuda.jit
def max_before(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        m = -math.inf
        for j in range(x.shape[1]):
            out[i, j] = m
            m = max(m, x[i, j])


@cuda.jit
def last_column(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        for j in range(x.shape[1]):
            out[i] = 2 * x[i, j]


@cuda.jit
def interleave(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[2 * i] = x[i]
        out[2 * i + 1] = -x[i]


@cuda.jit
def scale_flat(x, out):
    idx = cuda.grid(1)
    n, m = x.shape
    if idx < n * m:
        r = idx // m
        c = idx % m
        out[r, c] = x[r, c] * 3


@cuda.jit
def read_own_writes(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i]
        out[i] += 1
        if x[i] > 0:
            out[i] *= 2
