// The only file in fusekit that knows whether it is compiled as CUDA or as HIP.
//
// Everything that differs between the two lives here, under one #if: runtime API names, error
// strings, device properties, launches (with programmatic dependent launch where the hardware has
// it), warp shuffles, the approximate exp2 and reciprocal, the grid-dependency controls, and the
// 16-bit float conversion intrinsics.
// Kernels and launchers include this header and never test __CUDACC__ / __HIPCC__ themselves.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#define FUSEKIT_PLATFORM_HIP 1
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#define FUSEKIT_PLATFORM_CUDA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include "core/host_device.h"  // FUSEKIT_HOST_DEVICE

#define FUSEKIT_DEVICE __device__ __forceinline__

namespace fusekit::gpu {

// ---------------------------------------------------------------------------------------------
// Runtime API
// ---------------------------------------------------------------------------------------------
// The runtime calls of both platforms have the same names but for the prefix (cudaMalloc,
// hipMalloc), so each wrapper is written once, through FUSEKIT_RUNTIME(Name).
#if FUSEKIT_PLATFORM_HIP
#define FUSEKIT_RUNTIME(name) hip##name
using DeviceProperties = hipDeviceProp_t;
constexpr const char* kBackendName = "hip";
constexpr hipError_t kNoKernelImage = hipErrorNoBinaryForGpu;
#else
#define FUSEKIT_RUNTIME(name) cuda##name
using DeviceProperties = cudaDeviceProp;
constexpr const char* kBackendName = "cuda";
constexpr cudaError_t kNoKernelImage = cudaErrorNoKernelImageForDevice;
#endif
using StreamHandle = FUSEKIT_RUNTIME(Stream_t);
using ErrorCode = FUSEKIT_RUNTIME(Error_t);
constexpr ErrorCode kSuccess = FUSEKIT_RUNTIME(Success);
inline const char* error_string(ErrorCode e) { return FUSEKIT_RUNTIME(GetErrorString)(e); }
inline ErrorCode get_last_error() { return FUSEKIT_RUNTIME(GetLastError)(); }
inline ErrorCode get_device(int* d) { return FUSEKIT_RUNTIME(GetDevice)(d); }
inline ErrorCode set_device(int d) { return FUSEKIT_RUNTIME(SetDevice)(d); }
inline ErrorCode get_device_count(int* n) { return FUSEKIT_RUNTIME(GetDeviceCount)(n); }
inline ErrorCode device_synchronize() { return FUSEKIT_RUNTIME(DeviceSynchronize)(); }
inline ErrorCode malloc_device(void** p, size_t bytes) { return FUSEKIT_RUNTIME(Malloc)(p, bytes); }
inline ErrorCode free_device(void* p) { return FUSEKIT_RUNTIME(Free)(p); }
inline ErrorCode memset_async(void* p, int v, size_t bytes, StreamHandle s) {
  return FUSEKIT_RUNTIME(MemsetAsync)(p, v, bytes, s);
}
enum class CopyDirection { kH2D = FUSEKIT_RUNTIME(MemcpyHostToDevice),
                           kD2H = FUSEKIT_RUNTIME(MemcpyDeviceToHost),
                           kD2D = FUSEKIT_RUNTIME(MemcpyDeviceToDevice) };
inline ErrorCode memcpy_async(void* dst, const void* src, size_t bytes, CopyDirection dir,
                              StreamHandle s) {
  return FUSEKIT_RUNTIME(MemcpyAsync)(dst, src, bytes,
                                      static_cast<FUSEKIT_RUNTIME(MemcpyKind)>(dir), s);
}
inline ErrorCode stream_synchronize(StreamHandle s) {
  return FUSEKIT_RUNTIME(StreamSynchronize)(s);
}
inline std::string device_name(int d) {
  DeviceProperties prop;
  return FUSEKIT_RUNTIME(GetDeviceProperties)(&prop, d) == kSuccess ? std::string(prop.name)
                                                                    : "unknown";
}

// Streams, events and graphs (the benchmark's timing; the library itself uses none of them).
using EventHandle = FUSEKIT_RUNTIME(Event_t);
using GraphHandle = FUSEKIT_RUNTIME(Graph_t);
using GraphExecHandle = FUSEKIT_RUNTIME(GraphExec_t);
inline ErrorCode stream_create(StreamHandle* s) { return FUSEKIT_RUNTIME(StreamCreate)(s); }
inline ErrorCode stream_destroy(StreamHandle s) { return FUSEKIT_RUNTIME(StreamDestroy)(s); }
inline ErrorCode event_create(EventHandle* e) { return FUSEKIT_RUNTIME(EventCreate)(e); }
inline ErrorCode event_destroy(EventHandle e) { return FUSEKIT_RUNTIME(EventDestroy)(e); }
inline ErrorCode event_record(EventHandle e, StreamHandle s) {
  return FUSEKIT_RUNTIME(EventRecord)(e, s);
}
inline ErrorCode event_synchronize(EventHandle e) { return FUSEKIT_RUNTIME(EventSynchronize)(e); }
inline ErrorCode event_elapsed_ms(float* ms, EventHandle start, EventHandle end) {
  return FUSEKIT_RUNTIME(EventElapsedTime)(ms, start, end);
}
// Capture in global mode: any call during the capture that could touch another stream fails.
inline ErrorCode stream_begin_capture(StreamHandle s) {
  return FUSEKIT_RUNTIME(StreamBeginCapture)(s, FUSEKIT_RUNTIME(StreamCaptureModeGlobal));
}
inline ErrorCode stream_end_capture(StreamHandle s, GraphHandle* g) {
  return FUSEKIT_RUNTIME(StreamEndCapture)(s, g);
}
inline ErrorCode graph_instantiate(GraphExecHandle* exec, GraphHandle g) {
  return FUSEKIT_RUNTIME(GraphInstantiateWithFlags)(exec, g, 0);
}
inline ErrorCode graph_launch(GraphExecHandle exec, StreamHandle s) {
  return FUSEKIT_RUNTIME(GraphLaunch)(exec, s);
}
inline ErrorCode graph_destroy(GraphHandle g) { return FUSEKIT_RUNTIME(GraphDestroy)(g); }
inline ErrorCode graph_exec_destroy(GraphExecHandle exec) {
  return FUSEKIT_RUNTIME(GraphExecDestroy)(exec);
}

// What the launch heuristics need to know about a device, read once per device.
// The largest thread-block cluster any supported GPU runs (Hopper's non-portable size).
constexpr int kMaxClusterBlocks = 16;

struct DeviceInfo {
  int index = 0;
  int warp_size = 32;
  int sm_count = 1;
  int cc_major = 0;  // compute capability (CUDA) or gfx major (HIP)
  int max_threads_per_sm = 2048;
  int max_smem_per_block = 48 * 1024;  // opt-in limit, bytes
  int l2_bytes = 0;
  bool supports_pdl = false;  // programmatic dependent launch (CUDA, sm_90+)
  int max_cluster_blocks = 1;  // thread-block clusters with distributed shared memory (CUDA,
                               // sm_90+: kMaxClusterBlocks, with the non-portable size allowed
                               // per kernel); 1 where there are none
};

// Properties of device `index`, cached; returns kSuccess or the runtime's error.
ErrorCode query_device_info(int index, DeviceInfo* info);

// Reads device `index`'s properties from the runtime (uncached; query_device_info caches).
inline ErrorCode read_device_info(int index, DeviceInfo* d) {
  DeviceProperties prop;
  const ErrorCode e = FUSEKIT_RUNTIME(GetDeviceProperties)(&prop, index);
  if (e != kSuccess) return e;
#if FUSEKIT_PLATFORM_HIP
  d->max_smem_per_block = static_cast<int>(prop.sharedMemPerBlock);  // no opt-in above it
  d->supports_pdl = false;
#else
  d->max_smem_per_block = static_cast<int>(prop.sharedMemPerBlockOptin);
  d->supports_pdl = prop.major >= 9;
  d->max_cluster_blocks = prop.major >= 9 ? kMaxClusterBlocks : 1;
#endif
  d->index = index;
  d->warp_size = prop.warpSize;
  d->sm_count = prop.multiProcessorCount;
  d->cc_major = prop.major;
  d->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  d->l2_bytes = prop.l2CacheSize;
  return kSuccess;
}

// Whether kernels for 64-lane warps are built (AMD CDNA); 32-lane ones always are.
#if FUSEKIT_PLATFORM_HIP
constexpr bool kBuildsWave64 = true;
#else
constexpr bool kBuildsWave64 = false;
#endif

// Makes `device` current for the lifetime of the guard, restoring the previous one after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    (void)get_device(&previous_);
    if (previous_ != device) (void)set_device(device);
  }
  ~DeviceGuard() {
    int now = previous_;
    (void)get_device(&now);
    if (now != previous_) (void)set_device(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Raises a kernel's dynamic shared-memory limit (needed above 48 KB on CUDA).
template <typename Kernel>
ErrorCode set_max_dynamic_smem(Kernel kernel, int bytes) {
#if FUSEKIT_PLATFORM_HIP
  return hipFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                             hipFuncAttributeMaxDynamicSharedMemorySize, bytes);
#else
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
#endif
}

// How many blocks of `block_threads` threads (and `smem` bytes of dynamic shared memory each) of
// `kernel` one SM holds at once: its registers, shared memory and thread slots.
template <typename Kernel>
ErrorCode max_resident_blocks(Kernel kernel, int block_threads, size_t smem, int* blocks) {
#if FUSEKIT_PLATFORM_HIP
  return hipOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks, reinterpret_cast<const void*>(kernel), block_threads, smem);
#else
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, block_threads, smem);
#endif
}

// Lets `kernel` launch in clusters of more than the portable 8 blocks (Hopper allows 16).
template <typename Kernel>
ErrorCode allow_large_clusters(Kernel kernel) {
#if FUSEKIT_PLATFORM_HIP
  (void)kernel;
  return hipErrorInvalidValue;
#else
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
#endif
}

// How many clusters of `cluster_blocks` blocks of `block_threads` threads (and `smem` bytes of
// dynamic shared memory each) of `kernel` the device holds at once (CUDA sm_90+; HIP has no
// clusters). A grid of that many clusters that loops over its work stays resident: no cluster
// waits for a GPC to free enough block slots at once.
template <typename Kernel>
ErrorCode max_resident_clusters(Kernel kernel, int block_threads, size_t smem, int cluster_blocks,
                                int* clusters) {
#if FUSEKIT_PLATFORM_HIP
  (void)kernel, (void)block_threads, (void)smem, (void)cluster_blocks;
  *clusters = 0;
  return hipErrorInvalidValue;
#else
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(cluster_blocks));
  config.blockDim = dim3(static_cast<unsigned>(block_threads));
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster_blocks);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaOccupancyMaxActiveClusters(clusters, kernel, &config);
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...). With `pdl` (CUDA sm_90+ only) the
// launch may begin while the previous kernel in the stream is finishing; kernels launched this
// way call wait_for_prior_grids() before touching global memory, so results are unchanged.
//
// launch_clustered groups consecutive blocks along x into clusters of `cluster_blocks` (which
// must divide grid.x; 1 is a plain launch); only where DeviceInfo::max_cluster_blocks allows it.
template <typename... KernelArgs, typename... Args>
ErrorCode launch_clustered(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                           StreamHandle stream, bool pdl, int cluster_blocks, Args&&... args) {
#if FUSEKIT_PLATFORM_HIP
  (void)pdl;
  if (cluster_blocks != 1) return hipErrorInvalidValue;
  hipLaunchKernelGGL(kernel, grid, block, smem, stream, static_cast<KernelArgs>(args)...);
  return hipGetLastError();
#else
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  unsigned count = 0;
  if (pdl) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster_blocks > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = static_cast<unsigned>(cluster_blocks);
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, static_cast<KernelArgs>(args)...);
#endif
}

template <typename... KernelArgs, typename... Args>
ErrorCode launch(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                 StreamHandle stream, bool pdl, Args&&... args) {
  return launch_clustered(kernel, grid, block, smem, stream, pdl, 1, std::forward<Args>(args)...);
}

// ---------------------------------------------------------------------------------------------
// Device side
// ---------------------------------------------------------------------------------------------

// 8- and 16-byte words for vectorized memory accesses (vec_io.cuh). CUDA's uint2 / uint4 are plain
// structs. HIP's are classes with user-provided assignment, which deletes the copy assignment of
// any union holding them (Packed); HIP uses clang's vector types instead: trivial, with the same
// size and alignment, and moved by single dwordx2 / dwordx4 instructions.
#if FUSEKIT_PLATFORM_HIP
typedef uint32_t Bytes8 __attribute__((ext_vector_type(2)));
typedef uint32_t Bytes16 __attribute__((ext_vector_type(4)));
#else
using Bytes8 = uint2;
using Bytes16 = uint4;
#endif
static_assert(sizeof(Bytes8) == 8 && alignof(Bytes8) == 8, "Bytes8: 8 bytes, 8-aligned");
static_assert(sizeof(Bytes16) == 16 && alignof(Bytes16) == 16, "Bytes16: 16 bytes, 16-aligned");

// Butterfly exchange within a warp of kWarp lanes (32 on NVIDIA and RDNA, 64 on CDNA); T: float
// or unsigned.
template <int kWarp, class T>
FUSEKIT_DEVICE T shfl_xor(T v, int lane_mask) {
#if FUSEKIT_PLATFORM_HIP
  return __shfl_xor(v, lane_mask, kWarp);
#else
  static_assert(kWarp == 32, "CUDA warps have 32 lanes");
  constexpr unsigned kAllLanes = ~0u;
  return __shfl_xor_sync(kAllLanes, v, lane_mask, kWarp);
#endif
}

// The largest of v as unsigned integers over each group of `lanes` lanes (a power of two up to
// kWarp); every lane gets its group's, and every lane of the warp must call it. Over the whole
// warp one reduction instruction on sm_80+ (redux.sync); xor shuffles, widest first, elsewhere.
template <int kWarp>
FUSEKIT_DEVICE unsigned warp_max_u32(unsigned v, int lanes = kWarp) {
#if FUSEKIT_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  static_assert(kWarp == 32, "CUDA warps have 32 lanes");
  if (lanes >= kWarp) return __reduce_max_sync(~0u, v);
#endif
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    if (offset < lanes) {
      const unsigned other = shfl_xor<kWarp>(v, offset);
      v = other > v ? other : v;
    }
  }
  return v;
}

// The special-function units' approximations of 2^x and 1/x, for math whose result is rounded to
// a 16-bit type (gpu/act/act_kernel.cuh's ApproxOps): one instruction each where the exact forms
// take a dozen. approx_exp2 is for x >= -126 (results below 2^-126 may be flushed to 0, which
// saves the range checks around the hardware instruction). CUDA: ex2.approx.ftz.f32 (relative
// error about 2^-22) and rcp.approx.ftz.f32 (within 1 ulp). HIP: the device library's exp2f
// (v_exp_f32 and its range scaling) and v_rcp_f32.
FUSEKIT_DEVICE float approx_exp2(float x) {
#if FUSEKIT_PLATFORM_HIP
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}
FUSEKIT_DEVICE float approx_reciprocal(float x) {
#if FUSEKIT_PLATFORM_HIP
  return __builtin_amdgcn_rcpf(x);
#else
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

// The body of a stub kernel (below), which the host never launches: it picks a kernel's copy by
// the device's warp size, and cluster kernels only where the device has clusters. Were one
// launched anyway (a device whose wave size is not the one its code was built for), it traps and
// the launch fails, rather than returning success with its outputs unwritten.
FUSEKIT_DEVICE void stub_launched() {
#if FUSEKIT_PLATFORM_CUDA
  __trap();
#else
  __builtin_trap();
#endif
}

// Whether device code for warp size kWarp can run on the GPU architecture now being compiled.
// The host cannot know the architecture, so dispatch_warp instantiates kernels for 32 and 64 on
// HIP, and each is compiled for every --offload-arch, although a gfx9 (wave64) device never runs
// the kWarp = 32 copy and a gfx10+ (wave32) device never runs the kWarp = 64 one. A kernel that
// starts with `if constexpr (!warp_size_compiled<K::kWarp>()) return stub_launched();` compiles
// to a stub there (the norm kernels do: about half the HIP build time for gfx90a + gfx1030).
// Always true on CUDA and in host code.
template <int kWarp>
FUSEKIT_HOST_DEVICE constexpr bool warp_size_compiled() {
#if FUSEKIT_PLATFORM_HIP && defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE)
  return kWarp == __AMDGCN_WAVEFRONT_SIZE;
#else
  return true;
#endif
}

// An empty instruction that claims to change v: the optimizer must treat v as new from here on,
// so values it derived from v earlier are derived again later instead of being kept in registers
// meanwhile. The norm kernels pass their packed 16-bit rows through it after the reduction, so
// that the row waits there packed (one register per two elements), not as floats.
FUSEKIT_DEVICE void opaque_register(uint32_t& v) {
#if FUSEKIT_PLATFORM_HIP
  asm volatile("" : "+v"(v));
#else
  asm volatile("" : "+r"(v));
#endif
}

// A point that the machine-code scheduler keeps the warp's memory accesses on their side of, for
// kernels whose loads must be issued where the source puts them. Under a tight register cap ptxas
// moves a load down to just before its first use, which shortens the registers' lifetime but
// exposes the load's latency (the quantizing gated activations' loads of the next group, issued
// before this group's math: bench/NOTES.md, "fp8 act_and_mul: warp tiles"). On CUDA it is a
// warp barrier over the full mask, which every lane of the warp must reach, and which orders the
// warp's memory accesses: one instruction. It pins memory accesses only, not arithmetic: it
// holds the loads where the code after it also touches memory (the staged kernel's stores of y
// to shared memory); before math alone, ptxas moves the math above it instead. On HIP it is
// nothing (AMD's scheduler was not looked at for this).
FUSEKIT_DEVICE void issue_memory_accesses_here() {
#if !FUSEKIT_PLATFORM_HIP
  __syncwarp();
#endif
}

// True for every v that is never negative (a sum of squares; NaN too), but known only once v is:
// a guard that holds the memory accesses under it until v is computed, where the scheduler would
// otherwise issue them as early as their addresses allow (issue_memory_accesses_here pins memory
// accesses against each other, not against math). opaque_register keeps the compiler from
// folding the test from how v was formed. The RMSNorm decode kernels' weight loads wait for the
// row's squares so (norm_registers_kernel.cuh).
FUSEKIT_DEVICE bool known_once(float non_negative) {
  uint32_t bits = __float_as_uint(non_negative);
  opaque_register(bits);
  return !(__uint_as_float(bits) < 0.0f);
}

// A global pointer that every thread of a block shares (the start of the row a block holds),
// formed apart from the per-thread offsets added to it later. Merged into each thread's address,
// row * stride + column is one IMAD whose stride operand ptxas reads with an LDC into a register
// after the wait for the previous grid, on the way to the kernel's first load; formed apart (an
// opaque move), ptxas reads the stride with a ULDC and multiplies on the uniform datapath. The
// assumption keeps the loads global ones (the move hides where the pointer came from). On HIP it
// is the pointer as it is.
template <class T>
FUSEKIT_DEVICE T* block_shared_pointer(T* p) {
#if !FUSEKIT_PLATFORM_HIP
  asm volatile("mov.b64 %0, %0;" : "+l"(p));
  __builtin_assume(__isGlobal(p));
#endif
  return p;
}

// A hint that the bytes [p, p + bytes) will be read soon: on CUDA sm_90+ the SM's bulk copy unit
// fetches them into L2 (cp.async.bulk.prefetch.L2), one instruction for the whole range, with no
// data returned and no register held while it is in flight. The range is narrowed to the 16-byte
// boundaries inside it, which the instruction needs. Nothing elsewhere (HIP, older CUDA
// architectures). The quantizing gated activations' blocks fetch later rows so
// (act_quant_kernel.cuh).
FUSEKIT_DEVICE void prefetch_to_l2(const void* p, uint32_t bytes) {
#if FUSEKIT_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint64_t at = reinterpret_cast<uint64_t>(p);
  const uint64_t begin = (at + 15) & ~uint64_t{15};
  const uint64_t end = (at + bytes) & ~uint64_t{15};
  if (begin < end) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(begin),
                 "r"(static_cast<uint32_t>(end - begin))
                 : "memory");
  }
#else
  (void)p;
  (void)bytes;
#endif
}

// a * b, rounded on its own: never fused with an add that uses it into one fma. The compiler
// otherwise decides per kernel whether to fuse (a product that goes through a select is not
// fused, one that goes straight into an add is), so sums of products would round differently in
// kernels that must give the same bits (the norm kernels' variants, batch invariance).
FUSEKIT_DEVICE float mul_unfused(float a, float b) {
#if FUSEKIT_PLATFORM_HIP
#pragma clang fp contract(off)
  return a * b;
#else
  return __fmul_rn(a, b);
#endif
}

// Programmatic dependent launch: wait until the grids this one depends on have completed and
// their memory is visible; then let the next grid in the stream start its launch.
FUSEKIT_DEVICE void wait_for_prior_grids() {
#if FUSEKIT_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
FUSEKIT_DEVICE void allow_dependent_grids() {
#if FUSEKIT_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Thread-block clusters (CUDA sm_90+): the blocks of a cluster run at once and read each other's
// shared memory. clusters_compiled() says whether the code being compiled can use them: false on
// HIP and for CUDA architectures before sm_90 (kernels that need clusters start with
// `if constexpr (!clusters_compiled()) return stub_launched();` and are never launched there),
// true in host code.
FUSEKIT_HOST_DEVICE constexpr bool clusters_compiled() {
#if FUSEKIT_PLATFORM_HIP
  return false;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  return false;
#else
  return true;
#endif
}

// Whether the platform has thread-block clusters at all (CUDA, whose sm_90+ GPUs run them), the
// same in host and device code: it may decide which kernels are instantiated, where
// clusters_compiled() may only empty them.
constexpr bool platform_has_clusters() {
#if FUSEKIT_PLATFORM_HIP
  return false;
#else
  return true;
#endif
}

#if FUSEKIT_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FUSEKIT_CLUSTER_DEVICE_CODE 1
#endif

// This block's index within its cluster.
FUSEKIT_DEVICE unsigned cluster_block_rank() {
#if FUSEKIT_CLUSTER_DEVICE_CODE
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
#else
  return 0;
#endif
}

// Barrier over every thread of the cluster, after which every block of it has started and the
// mailboxes its blocks initialized before it (mailbox_publish_init) are ready for peers' sends.
// The arrival is relaxed: the mailboxes' own fence is what publishes them, the pairing PTX asks
// of fence.mbarrier_init, so no other shared-memory write before it is ordered by it. A release
// arrival would add a fence at GPU scope to every thread's path (MEMBAR.ALL.GPU on sm_90).
FUSEKIT_DEVICE void cluster_barrier() {
#if FUSEKIT_CLUSTER_DEVICE_CODE
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
#else
  __syncthreads();
#endif
}

// Cluster mailboxes (CUDA sm_90+): a block sends a float into a slot of a peer's shared memory
// with an asynchronous store that counts its bytes on the peer's mailbox (an mbarrier), and the
// peer waits on that mailbox for as many bytes as it expects. Unlike a cluster barrier, neither
// side fences: a sender's other loads and stores in flight stay in flight. A mailbox completes
// one phase per use; the waiter names the phase by its parity.
struct ClusterMailbox {
  uint64_t state;
};

// One thread initializes a mailbox (one expected arrival per phase: mailbox_expect's);
// mailbox_publish_init then makes its block's initialized mailboxes visible to the cluster,
// before a cluster_barrier after which peers may send.
FUSEKIT_DEVICE void mailbox_init(ClusterMailbox* box) {
#if FUSEKIT_CLUSTER_DEVICE_CODE
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(box));
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(address) : "memory");
#else
  (void)box;
#endif
}

FUSEKIT_DEVICE void mailbox_publish_init() {
#if FUSEKIT_CLUSTER_DEVICE_CODE
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// The mailbox's one arrival of this phase (one thread of the receiving block): the phase
// completes when `bytes` have been sent into it, whether they came before or after this call.
FUSEKIT_DEVICE void mailbox_expect(ClusterMailbox* box, unsigned bytes) {
#if FUSEKIT_CLUSTER_DEVICE_CODE
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(box));
  asm volatile(
      "{\n\t.reg .b64 state;\n\t"
      "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n\t}" ::"r"(address),
      "r"(bytes)
      : "memory");
#else
  (void)box, (void)bytes;
#endif
}

// The addresses in block `rank`'s shared memory of this block's `slot` and `box` (mailbox_send's).
struct MailboxTarget {
  unsigned slot;
  unsigned box;
};
FUSEKIT_DEVICE MailboxTarget mailbox_target(const void* slot, ClusterMailbox* box, unsigned rank) {
  MailboxTarget t{0, 0};
#if FUSEKIT_CLUSTER_DEVICE_CODE
  const auto slot_address = static_cast<unsigned>(__cvta_generic_to_shared(slot));
  const auto box_address = static_cast<unsigned>(__cvta_generic_to_shared(box));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(t.slot) : "r"(slot_address),
               "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(t.box) : "r"(box_address),
               "r"(rank));
#else
  (void)slot, (void)box, (void)rank;
#endif
  return t;
}

// Stores v into `slot` of block `rank`'s shared memory (slot and box are this block's addresses
// of the same variables) and counts 4 bytes on that block's `box`.
FUSEKIT_DEVICE void mailbox_send(float* slot, ClusterMailbox* box, unsigned rank, float v) {
  const MailboxTarget t = mailbox_target(slot, box, rank);
#if FUSEKIT_CLUSTER_DEVICE_CODE
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];"
               ::"r"(t.slot), "f"(v), "r"(t.box)
               : "memory");
#else
  (void)t, (void)v;
#endif
}

// mailbox_send's for a pair of floats (8 bytes counted), one store: `slot` 8-byte aligned.
FUSEKIT_DEVICE void mailbox_send(float2* slot, ClusterMailbox* box, unsigned rank, float2 v) {
  const MailboxTarget t = mailbox_target(slot, box, rank);
#if FUSEKIT_CLUSTER_DEVICE_CODE
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];"
      ::"r"(t.slot), "f"(v.x), "f"(v.y), "r"(t.box)
      : "memory");
#else
  (void)t, (void)v;
#endif
}

// Waits until the mailbox's phase of parity `phase` has completed; its slots' values are then
// visible to the calling thread.
FUSEKIT_DEVICE void mailbox_wait(ClusterMailbox* box, unsigned phase) {
#if FUSEKIT_CLUSTER_DEVICE_CODE
  const auto address = static_cast<unsigned>(__cvta_generic_to_shared(box));
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(address), "r"(phase)
        : "memory");
  }
#else
  (void)box, (void)phase;
#endif
}

// float32 -> e4m3fn conversion by the hardware (CUDA sm_89+), two values per instruction:
// round to nearest even, saturating to +-448 (infinities too), NaN -> 0x7F. That is the rule of
// core/fp8.h's float_to_fp8<Fp8E4M3FN>, which stays the reference (and the only conversion on HIP
// and before sm_89); e4m3fnuz's codes come from it too (gpu/common/fp8_pack.cuh). The GPU tests
// compare them bit for bit, over every float and through the ops.
FUSEKIT_HOST_DEVICE constexpr bool hardware_e4m3fn_compiled() {
#if FUSEKIT_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return true;
#else
  return false;
#endif
}

// Whether some GPU of the platform converts to e4m3fn in hardware (CUDA: sm_89 and later; HIP
// here: none), the same in host and device code: it may decide which kernels are instantiated,
// where hardware_e4m3fn_compiled() decides only how a kernel converts.
constexpr bool platform_has_hardware_e4m3fn() {
#if FUSEKIT_PLATFORM_CUDA
  return true;
#else
  return false;
#endif
}

// Codes of (v0, v1, v2, v3) in one 32-bit word, v0 in the low byte (the element order of
// memory): two conversions, and the two 16-bit pairs placed as the halves of one register, where
// storing each code as a byte cost the compiler a dozen masks and shifts per four elements.
FUSEKIT_DEVICE uint32_t hardware_e4m3fn_quad(float v0, float v1, float v2, float v3) {
#if FUSEKIT_PLATFORM_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t word;
  asm("{\n\t.reg .b16 lo, hi;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
      "mov.b32 %0, {lo, hi};\n\t}"
      : "=r"(word)
      : "f"(v0), "f"(v1), "f"(v2), "f"(v3));
  return word;
#else
  (void)v0, (void)v1, (void)v2, (void)v3;
  return 0;  // never called: hardware_e4m3fn_compiled() is false
#endif
}

// 16-bit floats are carried as raw bits (uint16_t) through kernels; these are the conversions.
FUSEKIT_DEVICE float half_bits_to_float(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}
FUSEKIT_DEVICE uint16_t float_to_half_bits(float v) {
  return __half_as_ushort(__float2half_rn(v));
}
FUSEKIT_DEVICE float bf16_bits_to_float(uint16_t bits) {
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}
FUSEKIT_DEVICE uint16_t float_to_bf16_bits(float v) {
#if FUSEKIT_PLATFORM_HIP
  const uint32_t u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#else
  return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#endif
}
// Two floats rounded to nearest even and paired in one 32-bit word, lo in the low half (the
// element order of memory): the same bits as the conversions above, one instruction on CUDA,
// where rounding one at a time takes two and a third to pair them.
FUSEKIT_DEVICE uint32_t floats_to_bf16_pair_bits(float lo, float hi) {
#if FUSEKIT_PLATFORM_HIP
  return float_to_bf16_bits(lo) | static_cast<uint32_t>(float_to_bf16_bits(hi)) << 16;
#else
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
#endif
}
FUSEKIT_DEVICE uint32_t floats_to_half_pair_bits(float lo, float hi) {
#if FUSEKIT_PLATFORM_HIP
  return float_to_half_bits(lo) | static_cast<uint32_t>(float_to_half_bits(hi)) << 16;
#else
  const __half2 pair = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
#endif
}
// Two pairs of 16-bit floats added element by element (lo halves, hi halves), each sum rounded to
// nearest even: one packed add on CUDA, the floats' sums rounded on HIP. The same bits either
// way: the sum of two p-bit values rounded to float32 and then to p bits is the sum rounded once,
// as 24 >= 2p + 2 (p = 8 for bfloat16, 11 for half).
FUSEKIT_DEVICE uint32_t bf16_pair_sum_bits(uint32_t a, uint32_t b) {
#if FUSEKIT_PLATFORM_HIP
  return floats_to_bf16_pair_bits(__uint_as_float(a << 16) + __uint_as_float(b << 16),
                                  __uint_as_float(a & 0xFFFF0000u) +
                                      __uint_as_float(b & 0xFFFF0000u));
#else
  const __nv_bfloat162 sum = __hadd2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&sum);
#endif
}
FUSEKIT_DEVICE uint32_t half_pair_sum_bits(uint32_t a, uint32_t b) {
#if FUSEKIT_PLATFORM_HIP
  return floats_to_half_pair_bits(
      half_bits_to_float(static_cast<uint16_t>(a)) + half_bits_to_float(static_cast<uint16_t>(b)),
      half_bits_to_float(static_cast<uint16_t>(a >> 16)) +
          half_bits_to_float(static_cast<uint16_t>(b >> 16)));
#else
  const __half2 sum = __hadd2(*reinterpret_cast<const __half2*>(&a),
                              *reinterpret_cast<const __half2*>(&b));
  return *reinterpret_cast<const uint32_t*>(&sum);
#endif
}

}  // namespace fusekit::gpu

#undef FUSEKIT_RUNTIME  // the wrappers above are its only users
