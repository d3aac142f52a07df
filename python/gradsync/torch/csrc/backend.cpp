// SPDX-License-Identifier: Apache-2.0
//
// The "gradsync" torch.distributed backend for torch 2.x: a c10d::Backend
// over gradsync's C calls (docs/python.md, "PyTorch"; docs/design.md,
// "PyTorch 2.x backend").
//
// - An asynchronous op starts gradsync's non-blocking call(s) on the calling
//   thread and returns a Work that owns the requests; a synchronous CPU op
//   (torch's opts.asyncOp false) runs the blocking call there and returns a
//   completed Work. Work::wait() finishes the requests on the waiting
//   thread; getFuture() hands the Work to the backend's completion threads
//   (Completer, which grow when none is idle), which finish it and complete
//   the torch Future. Whichever comes first claims the Work (an atomic
//   flag): no Python, no second copy of a request, no wait without the
//   communicator's deadline.
// - Errors are c10::DistBackendError with gs_last_error()'s sentence; bad
//   input is refused with a c10::Error (RuntimeError) before anything is
//   sent, so nothing else changes.
// - Groups: the default group's backend makes its communicator through
//   gradsync's own rendezvous (Python agrees its address through torch's
//   store); every other group's comes from gs_comm_create_group over the
//   default group's communicator: only the members call, as torch calls
//   only the members' backend creators.
// - CUDA tensors (GS_TORCH_CUDA builds): the op runs on the backend's
//   stream for the device, which waits for the caller's current stream
//   (an event). On gradsync's NCCL path the call only enqueues
//   (GS_COLL_F_STREAM_ORDERED); Work::wait() makes the caller's current
//   stream wait for an event recorded after it, with no host
//   synchronisation, and the caching allocator is told the tensors are in
//   use on that stream. On the staged path (no NCCL) the call is a plain
//   non-blocking one and wait() finishes it on the host.
// - Compression (gradsync.torch.Options as pg_options, set_options): a
//   codec per group for all-reduce, reduce-scatter and all-gather, used for
//   float tensors with SUM/AVG (PREMUL_SUM: the scaled copy's sum); anything
//   else runs uncompressed (counted, logged once per reason at INFO). Error
//   feedback: a gs_ef_t per send buffer, keyed by (storage, offset, elements,
//   dtype) ("tensor") or by the call's ordinal since next_step ("order"), made
//   on first use, at most efCapacity entries and efCapacityBytes bytes kept
//   (LRU), leased to one call in flight at a time and freed with the backend.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#ifdef GS_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

extern "C" {
#include "gradsync/compress.h"
#include "gradsync/gradsync.h"
}

namespace gradsync_torch {

using c10d::OpType;

constexpr const char *kName = "gradsync";

// ---- errors -------------------------------------------------------------

[[noreturn]] void failed(const std::string &what, gs_status_t st)
{
    std::string msg = std::string("gradsync backend: ") + what + ": " + gs_status_name(st);
    const char *why = gs_last_error();
    if (why != nullptr && why[0] != '\0') {
        msg += ": ";
        msg += why;
    }
    C10_THROW_ERROR(DistBackendError, msg);
}

void check(gs_status_t st, const std::string &what)
{
    if (st != GS_OK) {
        failed(what, st);
    }
}

// A refusal of the caller's input (nothing was sent).
#define GS_REFUSE(...) TORCH_CHECK(false, "gradsync backend: ", __VA_ARGS__)

// ---- dtypes and ops -----------------------------------------------------

struct Elem {
    gs_dtype_t dtype;
    size_t per; // gradsync elements per torch element
};

// For a reduction: the gradsync dtype of @t (complex numbers as two floats,
// for SUM and AVG only). A dtype gradsync cannot reduce is refused.
Elem reduceElem(const at::Tensor &t, const char *what)
{
    switch (t.scalar_type()) {
    case at::kFloat: return {GS_DTYPE_F32, 1};
    case at::kDouble: return {GS_DTYPE_F64, 1};
    case at::kHalf: return {GS_DTYPE_F16, 1};
    case at::kBFloat16: return {GS_DTYPE_BF16, 1};
    case at::kChar: return {GS_DTYPE_I8, 1};
    case at::kByte: return {GS_DTYPE_U8, 1};
    case at::kBool: return {GS_DTYPE_U8, 1};
    case at::kInt: return {GS_DTYPE_I32, 1};
    case at::kLong: return {GS_DTYPE_I64, 1};
    case at::kComplexFloat: return {GS_DTYPE_F32, 2};
    case at::kComplexDouble: return {GS_DTYPE_F64, 2};
    default:
        GS_REFUSE(what, ": cannot reduce dtype ", t.scalar_type(),
                  " (reduced: float32, float64, float16, bfloat16, int8, uint8, bool, int32, "
                  "int64, complex64 and complex128 with SUM or AVG); move it with a "
                  "non-reducing collective or cast it");
    }
}

// For data movement: whole elements as bytes, any dtype.
Elem moveElem(const at::Tensor &t)
{
    return {GS_DTYPE_U8, static_cast<size_t>(t.element_size())};
}

struct Reduce {
    gs_op_t op;
    double premul; // PREMUL_SUM's factor, else 1
    bool scaled;
};

Reduce reduceOp(const c10d::ReduceOp &rop, const at::Tensor &t, const char *what)
{
    const bool isBool = t.scalar_type() == at::kBool;
    const bool isComplex = t.is_complex();
    const bool isFloat = at::isFloatingType(t.scalar_type()) || isComplex;
    Reduce r{GS_OP_SUM, 1.0, false};

    switch (rop.op_) {
    case c10d::ReduceOp::SUM: r.op = isBool ? GS_OP_MAX : GS_OP_SUM; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? GS_OP_MIN : GS_OP_PROD; break;
    case c10d::ReduceOp::MIN: r.op = GS_OP_MIN; break;
    case c10d::ReduceOp::MAX: r.op = GS_OP_MAX; break;
    case c10d::ReduceOp::BAND: r.op = GS_OP_BAND; break;
    case c10d::ReduceOp::BOR: r.op = GS_OP_BOR; break;
    case c10d::ReduceOp::BXOR: r.op = GS_OP_BXOR; break;
    case c10d::ReduceOp::AVG:
        if (!isFloat) {
            GS_REFUSE(what, ": AVG needs a floating-point tensor, got ", t.scalar_type(),
                      "; SUM and divide, or cast");
        }
        r.op = GS_OP_AVG;
        break;
    case c10d::ReduceOp::PREMUL_SUM: {
        if (!isFloat) {
            GS_REFUSE(what, ": PREMUL_SUM needs a floating-point tensor, got ", t.scalar_type());
        }
        auto *sup = dynamic_cast<c10d::PreMulSumSupplement *>(rop.supplement_.get());
        TORCH_CHECK(sup != nullptr, "gradsync backend: ", what, ": PREMUL_SUM without a factor");
        r.premul = sup->tensor_factor.defined() ? sup->tensor_factor.item<double>()
                                                : sup->double_factor;
        r.scaled = true;
        r.op = GS_OP_SUM;
        break;
    }
    default: GS_REFUSE(what, ": unsupported reduce op ", static_cast<int>(rop.op_));
    }
    if (isComplex && r.op != GS_OP_SUM && r.op != GS_OP_AVG) {
        GS_REFUSE(what, ": complex tensors reduce with SUM, AVG or PREMUL_SUM only");
    }
    if ((r.op == GS_OP_BAND || r.op == GS_OP_BOR || r.op == GS_OP_BXOR) && isFloat) {
        GS_REFUSE(what, ": bitwise ops need integer tensors, got ", t.scalar_type());
    }
    if (isBool && r.op == GS_OP_BOR) {
        r.op = GS_OP_MAX;
    } else if (isBool && r.op == GS_OP_BAND) {
        r.op = GS_OP_MIN;
    }
    return r;
}

// ---- input checks -------------------------------------------------------

// Every tensor of a call: dense (strided), one device type, and CUDA ones
// contiguous (staging a copy on the host is only for CPU tensors).
void checkTensor(const at::Tensor &t, const char *what, c10::DeviceType dev)
{
    if (t.layout() != at::kStrided) {
        GS_REFUSE(what, ": ", t.layout(), " tensors are not supported (dense tensors only)");
    }
    if (t.device().type() != dev) {
        GS_REFUSE(what, ": tensors on ", t.device(), " and ", dev,
                  " in one call; put them on one device");
    }
    if (dev != c10::DeviceType::CPU && dev != c10::DeviceType::CUDA) {
        GS_REFUSE(what, ": ", dev, " tensors are not supported (CPU and CUDA)");
    }
#ifndef GS_TORCH_CUDA
    if (dev == c10::DeviceType::CUDA) {
        GS_REFUSE(what, ": this build of the extension has no CUDA support; rebuild it with "
                        "torch's CUDA headers (docs/python.md)");
    }
#endif
    if (dev == c10::DeviceType::CUDA && !t.is_contiguous()) {
        GS_REFUSE(what, ": CUDA tensors must be contiguous");
    }
}

c10::DeviceType deviceOf(const std::vector<at::Tensor> &ts, const char *what)
{
    TORCH_CHECK(!ts.empty(), "gradsync backend: ", what, ": no tensors");
    c10::DeviceType dev = ts[0].device().type();
    for (const auto &t : ts) {
        checkTensor(t, what, dev);
    }
    return dev;
}

const at::Tensor &one(const std::vector<at::Tensor> &ts, const char *what)
{
    if (ts.size() != 1) {
        GS_REFUSE(what, " takes one tensor per call, got ", ts.size());
    }
    return ts[0];
}

// ---- compression (gradsync.torch.Options, pg_options) --------------------

// An op's short name (GS_OP_MAP, types.h).
const char *opName(gs_op_t op)
{
    switch (op) {
#define GS_OP_NAME_ROW(name, value, str)                                                          \
    case name: return str;
        GS_OP_MAP(GS_OP_NAME_ROW)
#undef GS_OP_NAME_ROW
    default: return "?";
    }
}

// The collectives a group's options name a codec for.
enum CollKind { kAllreduce = 0, kReduceScatter = 1, kAllgather = 2, kCollKinds = 3 };
const char *const kCollKindName[kCollKinds] = {"allreduce", "reduce_scatter", "allgather"};

// The gradsync float dtype of a real floating-point tensor, or false: only these
// compress (integers, bool and complex run uncompressed).
bool floatDtype(const at::Tensor &t, gs_dtype_t *out)
{
    switch (t.scalar_type()) {
    case at::kFloat: *out = GS_DTYPE_F32; return true;
    case at::kDouble: *out = GS_DTYPE_F64; return true;
    case at::kHalf: *out = GS_DTYPE_F16; return true;
    case at::kBFloat16: *out = GS_DTYPE_BF16; return true;
    default: return false;
    }
}

// How a group keys its residuals (gradsync.torch.Options(error_feedback=)).
enum EfMode { kEfOff = 0, kEfTensor = 1, kEfOrder = 2 };

// The residual of one send buffer (gs_ef_t), owned by the backend's EfTable and by
// the lease of a call in flight, whichever lets go last. @count and @dtype are what it
// was made for, @bytes what it is charged against ef_capacity_bytes.
struct EfEntry {
    gs_ef_t ef = nullptr;
    std::atomic<bool> busy{false}; // leased to a call in flight
    size_t count = 0;
    int dtype = -1;
    size_t bytes = 0;
    EfEntry() = default;
    EfEntry(const EfEntry &) = delete;
    EfEntry &operator=(const EfEntry &) = delete;
    ~EfEntry()
    {
        if (ef != nullptr) {
            (void)gs_ef_destroy(ef);
        }
    }
};

// One call's use of a residual: handed back when the Work lets go of it (finish).
struct EfLease {
    std::shared_ptr<EfEntry> entry;
    explicit EfLease(std::shared_ptr<EfEntry> e) : entry(std::move(e)) {}
    EfLease(const EfLease &) = delete;
    EfLease &operator=(const EfLease &) = delete;
    ~EfLease() { entry->busy.store(false); }
};

// A residual's key. error_feedback="tensor": a send buffer's identity: its storage,
// where the tensor starts in it, its element count and dtype (an address the allocator
// hands out again for the same size and dtype is the same key: see docs/python.md on
// what FSDP2 does). error_feedback="order": the collective (storage nullptr, numel the
// CollKind) and the call's ordinal since the last next_step (offset), dtype -1; the
// entry's own count and dtype say whether the call still matches it.
struct EfKey {
    const void *storage;
    int64_t offset;
    int64_t numel;
    int dtype;
    bool operator==(const EfKey &o) const
    {
        return storage == o.storage && offset == o.offset && numel == o.numel &&
               dtype == o.dtype;
    }
};

struct EfKeyHash {
    size_t operator()(const EfKey &k) const
    {
        size_t h = std::hash<const void *>()(k.storage);
        h = h * 31 + std::hash<int64_t>()(k.offset);
        h = h * 31 + std::hash<int64_t>()(k.numel);
        return h * 31 + static_cast<size_t>(k.dtype);
    }
};

// Counters of what a backend compressed (compression_stats()).
struct CompStats {
    std::atomic<uint64_t> compressed[kCollKinds] = {};
    std::atomic<uint64_t> uncompressed[kCollKinds] = {};
    std::atomic<uint64_t> efCreated{0}, efReused{0}, efEvicted{0}, efBusy{0};
    std::atomic<uint64_t> efReset{0}, efOversize{0}, steps{0};
};

// The residuals of a backend, at most @cap of them and at most @capBytes bytes of them
// together: past either cap the least recently used go first (a call in flight keeps
// its own until it finishes). A residual larger than @capBytes alone is never made
// (the call runs without error feedback, counted as ef_oversize).
class EfTable {
public:
    // @key's residual (made for @count elements of @dtype, @bytes, on first use), leased
    // to one call; nullptr when a call in flight holds it or it would not fit (this call
    // then runs without). An entry under @key made for another count or dtype is
    // replaced by a fresh one (ef_reset).
    std::shared_ptr<EfLease> lease(const EfKey &key, size_t count, gs_dtype_t dtype,
                                   size_t bytes, size_t cap, size_t capBytes, CompStats &stats)
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = map_.find(key);
        std::shared_ptr<EfEntry> e;
        if (it != map_.end()) {
            e = it->second->second;
            if (e->count == count && e->dtype == static_cast<int>(dtype)) {
                lru_.splice(lru_.begin(), lru_, it->second);
                if (e->busy.exchange(true)) {
                    stats.efBusy++;
                    return nullptr;
                }
                stats.efReused++;
                return std::make_shared<EfLease>(std::move(e));
            }
            // The same ordinal with another shape: what it owed belongs to another tensor.
            bytes_ -= e->bytes;
            lru_.erase(it->second);
            map_.erase(it);
            stats.efReset++;
        }
        if (bytes > capBytes) {
            stats.efOversize++;
            return nullptr;
        }
        e = std::make_shared<EfEntry>();
        check(gs_ef_create(count, dtype, &e->ef), "error feedback for a tensor");
        e->count = count;
        e->dtype = static_cast<int>(dtype);
        e->bytes = bytes;
        e->busy.store(true);
        lru_.emplace_front(key, e);
        map_[key] = lru_.begin();
        bytes_ += bytes;
        stats.efCreated++;
        while (lru_.size() > cap || bytes_ > capBytes) { // never the new one (it fits alone)
            bytes_ -= lru_.back().second->bytes;
            map_.erase(lru_.back().first);
            lru_.pop_back();
            stats.efEvicted++;
        }
        return std::make_shared<EfLease>(std::move(e));
    }

    size_t size()
    {
        std::lock_guard<std::mutex> lock(mu_);
        return lru_.size();
    }

    size_t bytes()
    {
        std::lock_guard<std::mutex> lock(mu_);
        return bytes_;
    }

private:
    using Item = std::pair<EfKey, std::shared_ptr<EfEntry>>;
    std::mutex mu_;
    std::list<Item> lru_; // most recently used first
    std::unordered_map<EfKey, std::list<Item>::iterator, EfKeyHash> map_;
    size_t bytes_ = 0; // of the residuals in lru_
};

// A group's options: a codec per collective (a copy of the caller's gs_codec_config_t)
// and how reductions keep error feedback.
struct Compression {
    bool on[kCollKinds] = {false, false, false};
    gs_codec_config_t cfg[kCollKinds];
    EfMode ef = kEfOff;
    size_t efCapacity = 4096;
    size_t efCapacityBytes = size_t(2) << 30;
};

// ---- synchronous ops ----------------------------------------------------

// torch says per op whether the caller waits at once (opts.asyncOp false: a plain
// dist.all_reduce). Such a CPU op runs gradsync's blocking call on the calling thread,
// which is what a small message needs (no hand-over to gradsync's worker and back), and
// returns a Work already complete. Set for the op's extent on its thread (ops call ops).
thread_local bool tlsSync = false;

struct SyncScope {
    bool prev;
    explicit SyncScope(bool asyncOp) : prev(tlsSync) { tlsSync = !asyncOp; }
    ~SyncScope() { tlsSync = prev; }
};

// ---- Work ---------------------------------------------------------------

class GsWork;
using WorkPtr = c10::intrusive_ptr<GsWork>;

// The completion threads: they finish the Works whose future was asked for, and the
// future's callbacks run there. One thread serves while it keeps up; when a Work arrives
// and none is idle (a callback is waiting on another Work's future, as torch's PowerSGD
// hook does inside then()), another starts, up to kMaxThreads, so a callback never waits
// on the thread it runs on. Threads are made on demand and joined at stop().
class Completer {
public:
    static constexpr size_t kMaxThreads = 16;
    ~Completer() { stop(); }
    void push(WorkPtr w);
    void stop();

private:
    void run();
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<WorkPtr> queue_;
    size_t idle_ = 0;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

class GsWork : public c10d::Work {
public:
    GsWork(int rank, OpType type, const char *what, std::vector<at::Tensor> outputs,
           std::vector<c10::Device> devices)
        : Work(rank, type), what_(what), outputs_(std::move(outputs)),
          future_(c10::make_intrusive<at::ivalue::Future>(
              c10::ListType::create(c10::TensorType::get()), std::move(devices)))
    {
    }

    ~GsWork() override
    {
        // Never waited for: the requests are still released (gs_wait is
        // bounded by the communicator's deadline).
        if (claim()) {
            finish(gs_waitall(reqs_.size(), reqs_.data()), false);
        }
    }

    std::vector<gs_request_t> reqs_;
    std::function<void()> after_;      // copy-out of staged buffers, on success
    std::vector<at::Tensor> keep_;     // buffers the requests use
    std::vector<std::shared_ptr<EfLease>> efs_; // residuals the requests use
    std::shared_ptr<Completer> completer_;
    int source_ = -1;                  // recvAnysource: the sender
    gs_p2p_status_t pstatus_{};        // receives: what arrived
    bool checkRecv_ = false;
    size_t expectBytes_ = 0;
#ifdef GS_TORCH_CUDA
    std::shared_ptr<at::cuda::CUDAEvent> done_; // recorded after a stream-ordered call
    bool fenced_ = false;                       // the backend's stream waits for the caller's
#endif

    bool inline_ = false; // a synchronous CPU op: gradsync's blocking call, on the caller

    const char *what() const { return what_; }
    bool claim() { return !claimed_.exchange(true); }

    // Finish the requests (claimed by the caller), run the copy-outs and
    // complete the Work and its future.
    void finish(gs_status_t st, bool notify = true)
    {
        std::exception_ptr ex;
        if (st == GS_OK && checkRecv_ && pstatus_.count != expectBytes_) {
            ex = std::make_exception_ptr(c10::DistBackendError(
                {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                std::string("gradsync backend: ") + what_ + ": received " +
                    std::to_string(pstatus_.count) + " bytes, expected " +
                    std::to_string(expectBytes_) + " (GS_ERR_MISMATCH)"));
        } else if (st != GS_OK) {
            try {
                failed(what_, st);
            } catch (...) {
                ex = std::current_exception();
            }
        } else if (after_) {
            try {
                after_();
            } catch (...) {
                ex = std::current_exception();
            }
        }
        if (st == GS_OK) {
            source_ = pstatus_.source;
        }
        keep_.clear();
        efs_.clear();
        after_ = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            completed_ = true;
            exception_ = ex;
        }
        cv_.notify_all();
        if (!notify) {
            return;
        }
        if (ex) {
            future_->setError(ex);
        } else {
            future_->markCompleted(c10::IValue(outputs_));
        }
    }

    bool isCompleted() override
    {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (completed_) {
                return true;
            }
        }
        if (!claim()) {
            return false; // another thread is finishing it
        }
        gs_status_t st = gs_testall(reqs_.size(), reqs_.data());
        if (st == GS_INPROGRESS) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                claimed_.store(false);
            }
            cv_.notify_all(); // a waiter that found it claimed tries again
            return false;
        }
        finish(st);
        return true;
    }

    bool isSuccess() const override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        return completed_ && !exception_;
    }

    // Finish it here, or wait until whoever claimed it has: isCompleted() claims only for
    // a look and gives the claim back, so a waiter that lost the race tries again.
    void finishOrWait()
    {
        for (;;) {
            if (claim()) {
                finish(gs_waitall(reqs_.size(), reqs_.data()));
                return;
            }
            std::unique_lock<std::mutex> lock(mutex_);
            cv_.wait(lock, [this] { return completed_ || !claimed_.load(); });
            if (completed_) {
                return;
            }
        }
    }

    bool wait(std::chrono::milliseconds /*timeout: the communicator's deadline bounds it*/) override
    {
        finishOrWait();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (exception_) {
                std::rethrow_exception(exception_);
            }
        }
#ifdef GS_TORCH_CUDA
        if (done_) {
            // The caller's stream waits for the op; the host does not.
            done_->block(c10::cuda::getCurrentCUDAStream(done_->device_index()));
        }
#endif
        return true;
    }

    void synchronize() override { wait(kNoTimeout); }

    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        bool hand = false;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            hand = !completed_ && !watched_;
            watched_ = true;
        }
        if (hand && completer_) {
            completer_->push(WorkPtr::reclaim_copy(this));
        }
        return future_;
    }

    int sourceRank() const override
    {
        std::lock_guard<std::mutex> lock(mutex_);
        TORCH_CHECK(completed_, "gradsync backend: sourceRank() before the receive finished; "
                                "wait() first");
        return source_;
    }

    std::vector<at::Tensor> result() override { return outputs_; }

    // Complete at once (stream-ordered CUDA ops: the stream orders the rest; their
    // requests come back already complete, and are released here).
    void completeNow()
    {
        if (claim()) {
            finish(gs_waitall(reqs_.size(), reqs_.data()));
        }
    }

private:
    const char *what_;
    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<at::ivalue::Future> future_;
    std::atomic<bool> claimed_{false};
    bool watched_ = false;
};

void Completer::push(WorkPtr w)
{
    {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(w));
        if (idle_ < queue_.size() && threads_.size() < kMaxThreads && !stopping_) {
            threads_.emplace_back([this] { run(); });
        }
    }
    cv_.notify_one();
}

void Completer::stop()
{
    std::vector<std::thread> threads;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
        threads.swap(threads_);
    }
    cv_.notify_all();
    for (auto &t : threads) {
        if (t.get_id() == std::this_thread::get_id()) {
            t.detach(); // stopped from a callback on this very thread: it returns next
        } else if (t.joinable()) {
            t.join();
        }
    }
}

void Completer::run()
{
    for (;;) {
        WorkPtr w;
        {
            std::unique_lock<std::mutex> lock(mu_);
            idle_++;
            cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            idle_--;
            if (queue_.empty()) {
                return; // stopping, and everything handed over is finished
            }
            w = std::move(queue_.front());
            queue_.pop_front();
        }
        w->finishOrWait();
    }
}

// A Work of several Works (endCoalescing): done when all are.
class GroupWork : public c10d::Work {
public:
    GroupWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
        : Work(rank, OpType::COALESCED), works_(std::move(works))
    {
    }
    bool isCompleted() override
    {
        for (auto &w : works_) {
            if (!w->isCompleted()) {
                return false;
            }
        }
        return true;
    }
    bool isSuccess() const override
    {
        for (auto &w : works_) {
            if (!w->isSuccess()) {
                return false;
            }
        }
        return true;
    }
    bool wait(std::chrono::milliseconds timeout) override
    {
        std::exception_ptr first;
        for (auto &w : works_) {
            try {
                w->wait(timeout);
            } catch (...) {
                if (!first) {
                    first = std::current_exception();
                }
            }
        }
        if (first) {
            std::rethrow_exception(first);
        }
        return true;
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futs(
            c10::FutureType::create(c10::ListType::create(c10::TensorType::get())));
        for (auto &w : works_) {
            futs.push_back(w->getFuture());
        }
        return c10::collectAll(futs);
    }

private:
    std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

// ---- the backend --------------------------------------------------------

class Backend : public c10d::Backend {
public:
    Backend(gs_comm_t comm, int rank, int size, std::chrono::milliseconds timeout)
        : c10d::Backend(rank, size), comm_(comm), completer_(std::make_shared<Completer>()),
          options_(c10::make_intrusive<c10d::Backend::Options>(kName, timeout))
    {
    }

    ~Backend() override { shutdown(); }

    gs_comm_t comm() const { return comm_; }

    const std::string getBackendName() const override { return kName; }
    c10::intrusive_ptr<Options> getBackendOptions() override { return options_; }
    bool supportsCoalescing() const override { return true; }
    bool supportsShrinking() const override { return true; }

    void shutdown() override
    {
        std::lock_guard<std::mutex> lock(lifeMu_);
        if (comm_ == nullptr) {
            return;
        }
        completer_->stop();
        (void)gs_comm_destroy(comm_);
        comm_ = nullptr;
    }

    void abort() override
    {
        std::lock_guard<std::mutex> lock(lifeMu_);
        if (comm_ != nullptr) {
            (void)gs_comm_abort(comm_);
        }
    }

    // -- coalescing: the ops in between start at once; endCoalescing's Work
    // waits for them all.
    void startCoalescing() override
    {
        std::lock_guard<std::mutex> lock(coalMu_);
        TORCH_CHECK(!coalescing_, "gradsync backend: startCoalescing twice");
        coalescing_ = true;
        coalesced_.clear();
    }

    c10::intrusive_ptr<c10d::Work> endCoalescing() override
    {
        std::lock_guard<std::mutex> lock(coalMu_);
        TORCH_CHECK(coalescing_, "gradsync backend: endCoalescing without startCoalescing");
        coalescing_ = false;
        return c10::make_intrusive<GroupWork>(getRank(), std::move(coalesced_));
    }

    // -- collectives

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const at::Tensor &t = one(tensors, "allreduce");
        return allreduceMany({t}, opts.reduceOp, OpType::ALLREDUCE, "allreduce");
    }

    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        return allreduceMany(tensors, opts.reduceOp, OpType::ALLREDUCE_COALESCED,
                             "allreduce_coalesced");
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const at::Tensor &t = one(tensors, "broadcast");
        const c10::DeviceType dev = deviceOf(tensors, "broadcast");
        checkRoot(opts.rootRank, "broadcast");
        auto w = newWork(OpType::BROADCAST, "broadcast", tensors, dev);
        at::Tensor buf = staged(w, t);
        const Elem e = moveElem(buf);
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return r ? gs_ibroadcast_ex(comm_, buf.data_ptr(), buf.numel() * e.per, e.dtype,
                                    static_cast<int>(opts.rootRank), o, r)
                     : gs_broadcast_ex(comm_, buf.data_ptr(), buf.numel() * e.per, e.dtype,
                                    static_cast<int>(opts.rootRank), o);
        });
        return finishStart(w, dev);
    }

    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const at::Tensor &t = one(tensors, "reduce");
        const c10::DeviceType dev = deviceOf(tensors, "reduce");
        checkRoot(opts.rootRank, "reduce");
        const Elem e = reduceElem(t, "reduce");
        const Reduce rop = reduceOp(opts.reduceOp, t, "reduce");
        auto w = newWork(OpType::REDUCE, "reduce", tensors, dev);
        at::Tensor buf = staged(w, t);
        if (rop.scaled) {
            buf.mul_(rop.premul);
        }
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return r ? gs_ireduce_ex(comm_, buf.data_ptr(), buf.data_ptr(), buf.numel() * e.per,
                                 e.dtype, rop.op, static_cast<int>(opts.rootRank), o, r)
                     : gs_reduce_ex(comm_, buf.data_ptr(), buf.data_ptr(), buf.numel() * e.per,
                                 e.dtype, rop.op, static_cast<int>(opts.rootRank), o);
        });
        return finishStart(w, dev);
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const at::Tensor &in = one(inputs, "allgather");
        if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(getSize())) {
            GS_REFUSE("allgather needs one list of ", getSize(), " output tensors");
        }
        std::vector<at::Tensor> all = outputs[0];
        all.push_back(in);
        const c10::DeviceType dev = deviceOf(all, "allgather");
        for (const auto &o : outputs[0]) {
            sameShape(o, in, "allgather");
        }
        auto w = newWork(OpType::ALLGATHER, "allgather", outputs[0], dev);
        at::Tensor send = in.contiguous();
        at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
        auto outs = outputs[0];
        w->keep_ = {send, flat};
        copyOutAfter(w, outs, flat, in.numel());
        const gs_codec_config_t *codec = codecFor(kAllgather, in, GS_OP_SUM, "allgather");
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return allgatherOne(send, flat, codec, "allgather", o, r);
        });
        return finishStart(w, dev);
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        std::vector<at::Tensor> outs{output}, ins{input};
        return allgatherMany(outs, ins, OpType::_ALLGATHER_BASE, "all_gather_into_tensor");
    }

    c10::intrusive_ptr<c10d::Work>
    allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::AllgatherOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        return allgatherMany(outputs, inputs, OpType::ALLGATHER_INTO_TENSOR_COALESCED,
                             "allgather_into_tensor_coalesced");
    }

    c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                                       std::vector<at::Tensor> &inputs,
                                                       const c10d::AllgatherOptions &opts) override
    {
        if (outputs.size() != inputs.size()) {
            GS_REFUSE("allgather_coalesced: ", outputs.size(), " output lists for ",
                      inputs.size(), " inputs");
        }
        std::vector<c10::intrusive_ptr<c10d::Work>> works;
        for (size_t i = 0; i < inputs.size(); i++) {
            std::vector<std::vector<at::Tensor>> o{outputs[i]};
            std::vector<at::Tensor> in{inputs[i]};
            works.push_back(allgather(o, in, opts));
        }
        return c10::make_intrusive<GroupWork>(getRank(), std::move(works));
    }

    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const at::Tensor &in = one(inputs, "gather");
        checkRoot(opts.rootRank, "gather");
        const bool root = opts.rootRank == getRank();
        const c10::DeviceType dev = deviceOf(rootList(outputs, in, root, "gather", "output"),
                                             "gather");
        auto w = newWork(OpType::GATHER, "gather", root ? outputs[0] : std::vector<at::Tensor>{},
                         dev);
        at::Tensor send = in.contiguous();
        at::Tensor flat;
        if (root) {
            flat = at::empty({getSize() * in.numel()}, in.options());
            auto outs = outputs[0];
            copyOutAfter(w, outs, flat, in.numel());
        }
        w->keep_ = {send, flat};
        const Elem e = moveElem(send);
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return r ? gs_igather_ex(comm_, send.data_ptr(), root ? flat.data_ptr() : nullptr,
                                 send.numel() * e.per, e.dtype, static_cast<int>(opts.rootRank), o, r)
                     : gs_gather_ex(comm_, send.data_ptr(), root ? flat.data_ptr() : nullptr,
                                 send.numel() * e.per, e.dtype, static_cast<int>(opts.rootRank), o);
        });
        return finishStart(w, dev);
    }

    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const at::Tensor &out = one(outputs, "scatter");
        checkRoot(opts.rootRank, "scatter");
        const bool root = opts.rootRank == getRank();
        const c10::DeviceType dev = deviceOf(rootList(inputs, out, root, "scatter", "input"),
                                             "scatter");
        auto w = newWork(OpType::SCATTER, "scatter", outputs, dev);
        at::Tensor buf = staged(w, out);
        at::Tensor send;
        if (root) {
            std::vector<at::Tensor> flat;
            for (const auto &i : inputs[0]) {
                flat.push_back(i.reshape({-1}));
            }
            send = at::cat(flat);
            w->keep_.push_back(send);
        }
        const Elem e = moveElem(buf);
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return r ? gs_iscatter_ex(comm_, root ? send.data_ptr() : nullptr, buf.data_ptr(),
                                  buf.numel() * e.per, e.dtype, static_cast<int>(opts.rootRank), o, r)
                     : gs_scatter_ex(comm_, root ? send.data_ptr() : nullptr, buf.data_ptr(),
                                  buf.numel() * e.per, e.dtype, static_cast<int>(opts.rootRank), o);
        });
        return finishStart(w, dev);
    }

    c10::intrusive_ptr<c10d::Work>
    reduce_scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                   const c10d::ReduceScatterOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const at::Tensor &out = one(outputs, "reduce_scatter");
        if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(getSize())) {
            GS_REFUSE("reduce_scatter needs one list of ", getSize(), " input tensors");
        }
        for (const auto &i : inputs[0]) {
            sameShape(i, out, "reduce_scatter");
        }
        std::vector<at::Tensor> flat;
        for (const auto &i : inputs[0]) {
            flat.push_back(i.reshape({-1}));
        }
        std::vector<at::Tensor> outs{out};
        std::vector<at::Tensor> ins{at::cat(flat)};
        const std::vector<at::Tensor> keys{inputs[0][0]};
        return reduceScatterMany(outs, ins, opts.reduceOp, OpType::REDUCE_SCATTER,
                                 "reduce_scatter", &keys);
    }

    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                                        const c10d::ReduceScatterOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        std::vector<at::Tensor> outs{output}, ins{input};
        return reduceScatterMany(outs, ins, opts.reduceOp, OpType::_REDUCE_SCATTER_BASE,
                                 "reduce_scatter_tensor");
    }

    c10::intrusive_ptr<c10d::Work>
    reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                    std::vector<at::Tensor> &inputs,
                                    const c10d::ReduceScatterOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        return reduceScatterMany(outputs, inputs, opts.reduceOp,
                                 OpType::REDUCE_SCATTER_TENSOR_COALESCED,
                                 "reduce_scatter_tensor_coalesced");
    }

    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &outSplits,
                                                 std::vector<int64_t> &inSplits,
                                                 const c10d::AllToAllOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const char *what = "all_to_all_single";
        const c10::DeviceType dev = deviceOf({output, input}, what);
        if (output.scalar_type() != input.scalar_type()) {
            GS_REFUSE(what, ": input ", input.scalar_type(), " and output ",
                      output.scalar_type(), " differ");
        }
        auto w = newWork(OpType::ALLTOALL_BASE, what, {output}, dev);
        at::Tensor send = input.contiguous();
        at::Tensor recv = staged(w, output);
        w->keep_.push_back(send);
        const size_t es = static_cast<size_t>(input.element_size());
        if (outSplits.empty() && inSplits.empty()) {
            if (send.numel() % getSize() != 0 || send.numel() != recv.numel()) {
                GS_REFUSE(what, ": ", send.numel(), " input and ", recv.numel(),
                          " output elements do not split into ", getSize(), " equal blocks");
            }
            start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
                return r ? gs_ialltoall_ex(comm_, send.data_ptr(), recv.data_ptr(),
                                       static_cast<size_t>(send.numel() / getSize()) * es,
                                       GS_DTYPE_U8, o, r)
                     : gs_alltoall_ex(comm_, send.data_ptr(), recv.data_ptr(),
                                       static_cast<size_t>(send.numel() / getSize()) * es,
                                       GS_DTYPE_U8, o);
            });
            return finishStart(w, dev);
        }
        auto sc = splitCounts(inSplits, send, what, "input");
        auto rc = splitCounts(outSplits, recv, what, "output");
        std::vector<size_t> sd(sc.size()), rd(rc.size());
        size_t acc = 0;
        for (size_t i = 0; i < sc.size(); i++) {
            sd[i] = acc;
            acc += sc[i];
        }
        acc = 0;
        for (size_t i = 0; i < rc.size(); i++) {
            rd[i] = acc;
            acc += rc[i];
        }
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return r ? gs_ialltoallv_ex(comm_, send.data_ptr(), static_cast<size_t>(send.numel()) * es,
                                    sc.data(), sd.data(), recv.data_ptr(),
                                    static_cast<size_t>(recv.numel()) * es, rc.data(), rd.data(),
                                    GS_DTYPE_U8, o, r)
                     : gs_alltoallv_ex(comm_, send.data_ptr(), static_cast<size_t>(send.numel()) * es,
                                    sc.data(), sd.data(), recv.data_ptr(),
                                    static_cast<size_t>(recv.numel()) * es, rc.data(), rd.data(),
                                    GS_DTYPE_U8, o);
        });
        return finishStart(w, dev);
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        const char *what = "all_to_all";
        if (outputs.size() != static_cast<size_t>(getSize()) ||
            inputs.size() != static_cast<size_t>(getSize())) {
            GS_REFUSE(what, " needs ", getSize(), " input and output tensors, got ",
                      inputs.size(), " and ", outputs.size());
        }
        std::vector<at::Tensor> all = outputs;
        all.insert(all.end(), inputs.begin(), inputs.end());
        deviceOf(all, what);
        std::vector<at::Tensor> flatIn;
        std::vector<int64_t> inSplits, outSplits;
        for (const auto &t : inputs) {
            flatIn.push_back(t.reshape({-1}));
            inSplits.push_back(t.numel());
        }
        int64_t total = 0;
        for (const auto &t : outputs) {
            outSplits.push_back(t.numel());
            total += t.numel();
        }
        at::Tensor send = at::cat(flatIn);
        at::Tensor recv = at::empty({total}, outputs[0].options());
        // Non-blocking even for a synchronous call: the copy-out below must be attached
        // before the flat exchange finishes (the caller's wait() finishes both).
        c10d::AllToAllOptions flatOpts = opts;
        flatOpts.asyncOp = true;
        auto w = alltoall_base(recv, send, outSplits, inSplits, flatOpts);
        // Copy out once it has finished: a Work over the flat one.
        auto outs = outputs;
        auto inner = c10::static_intrusive_pointer_cast<GsWork>(w);
        auto prev = inner->after_;
        inner->after_ = [prev, outs, recv, outSplits]() mutable {
            if (prev) {
                prev();
            }
            int64_t off = 0;
            for (size_t i = 0; i < outs.size(); i++) {
                outs[i].copy_(recv.narrow(0, off, outSplits[i]).view_as(outs[i]));
                off += outSplits[i];
            }
        };
        return w;
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override
    {
        SyncScope sync(opts.asyncOp);
        auto w = newWork(OpType::BARRIER, "barrier", {}, c10::DeviceType::CPU);
        if (w->inline_) {
            check(gs_barrier(comm_), "barrier");
            w->completeNow();
            return track(w);
        }
        gs_request_t r = GS_REQUEST_NULL;
        check(gs_ibarrier(comm_, &r), "barrier");
        w->reqs_.push_back(r);
        return track(w);
    }

    // -- point-to-point

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int tag) override
    {
        SyncScope sync(true); // point-to-point never holds the caller here
        const at::Tensor &t = one(tensors, "send");
        const c10::DeviceType dev = deviceOf(tensors, "send");
        checkPeer(dst, "send");
        auto w = newWork(OpType::SEND, "send", {}, dev);
        at::Tensor buf = t.contiguous();
        w->keep_.push_back(buf);
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return gs_isend_ex(comm_, buf.data_ptr(),
                               static_cast<size_t>(buf.numel()) * buf.element_size(), GS_DTYPE_U8,
                               dst, static_cast<uint32_t>(tag), o, r);
        });
        return finishStart(w, dev);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int tag) override
    {
        SyncScope sync(true); // point-to-point never holds the caller here
        checkPeer(src, "recv");
        return recvFrom(tensors, src, tag, OpType::RECV, "recv");
    }

    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override
    {
        SyncScope sync(true); // point-to-point never holds the caller here
        return recvFrom(tensors, GS_ANY_SOURCE, tag, OpType::RECVANYSOURCE, "recv (any source)");
    }

    // -- shrink: the survivors agree (gs_comm_shrink) and must agree with
    // the caller's list.
    c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t> &exclude, int,
                                             const c10::intrusive_ptr<Options> &) override
    {
        gs_comm_t child = nullptr;
        {
            std::lock_guard<std::mutex> lock(lifeMu_);
            TORCH_CHECK(comm_ != nullptr, "gradsync backend: shrink after shutdown");
            check(gs_comm_shrink(comm_, &child), "shrink");
        }
        int rank = -1, size = -1;
        (void)gs_comm_rank(child, &rank);
        (void)gs_comm_size(child, &size);
        const int want = getSize() - static_cast<int>(exclude.size());
        if (size != want) {
            (void)gs_comm_destroy(child);
            C10_THROW_ERROR(DistBackendError,
                            "gradsync backend: shrink: the survivors found " +
                                std::to_string(getSize() - size) + " rank(s) gone, the caller " +
                                "excluded " + std::to_string(exclude.size()) +
                                "; exclude exactly the ranks that failed");
        }
        auto b = c10::make_intrusive<Backend>(child, rank, size, options_->timeout);
        b->setCompression(comp_); // the same options; residuals start over
        return b;
    }

    // A group of some of this (the default group's) ranks, made by them alone.
    c10::intrusive_ptr<Backend> createGroup(const std::vector<int> &ranks, uint32_t tag,
                                            std::chrono::milliseconds timeout)
    {
        gs_comm_t child = nullptr;
        {
            std::lock_guard<std::mutex> lock(lifeMu_);
            TORCH_CHECK(comm_ != nullptr, "gradsync backend: new group after shutdown");
            check(gs_comm_create_group(comm_, static_cast<int>(ranks.size()), ranks.data(), tag,
                                       &child),
                  "new group");
        }
        int rank = -1;
        (void)gs_comm_rank(child, &rank);
        return c10::make_intrusive<Backend>(child, rank, static_cast<int>(ranks.size()), timeout);
    }

    // -- compression (gradsync.torch.Options): set once, before the first op.
    void setCompression(const Compression &c) { comp_ = c; }

    std::map<std::string, uint64_t> compressionStats()
    {
        std::map<std::string, uint64_t> out;
        for (int k = 0; k < kCollKinds; k++) {
            out[std::string(kCollKindName[k]) + "_compressed"] = stats_.compressed[k].load();
            out[std::string(kCollKindName[k]) + "_uncompressed"] = stats_.uncompressed[k].load();
        }
        out["ef_created"] = stats_.efCreated.load();
        out["ef_reused"] = stats_.efReused.load();
        out["ef_evicted"] = stats_.efEvicted.load();
        out["ef_busy"] = stats_.efBusy.load();
        out["ef_entries"] = efTable_.size();
        out["ef_bytes"] = efTable_.bytes();
        out["ef_reset"] = stats_.efReset.load();
        out["ef_oversize"] = stats_.efOversize.load();
        out["steps"] = stats_.steps.load();
        return out;
    }

    // gradsync.torch.next_step: error_feedback="order" counts calls from 0 again.
    void nextStep()
    {
        for (auto &o : ordinal_) {
            o.store(0);
        }
        stats_.steps++;
    }

private:
    // The codec for tensor @t of collective @k reduced with @op (GS_OP_SUM for
    // all-gather), or nullptr: none named, or one it cannot serve (not a real float
    // tensor, an op other than SUM/AVG), which runs uncompressed and is logged once.
    const gs_codec_config_t *codecFor(CollKind k, const at::Tensor &t, gs_op_t op,
                                      const char *what)
    {
        if (!comp_.on[k]) {
            return nullptr;
        }
        gs_dtype_t dt;
        if (!floatDtype(t, &dt)) {
            uncompressed(k, what, std::string("a ") + c10::toString(t.scalar_type()) + " tensor");
            return nullptr;
        }
        if (op != GS_OP_SUM && op != GS_OP_AVG) {
            uncompressed(k, what, std::string("the op ") + opName(op));
            return nullptr;
        }
        stats_.compressed[k]++;
        return &comp_.cfg[k];
    }

    // The residual for one call of @w sending @key (@count elements of @dtype; default:
    // @key's), or nullptr (no error feedback, another call in flight holds it, or it
    // would not fit in ef_capacity_bytes alone). error_feedback="tensor" keys it by
    // @key's identity, "order" by this call's ordinal among @k's compressed calls since
    // the last next_step (refused past ef_capacity: next_step was never called).
    gs_ef_t efFor(const WorkPtr &w, CollKind k, const at::Tensor &key, gs_dtype_t dtype,
                  size_t count = SIZE_MAX)
    {
        if (comp_.ef == kEfOff || k == kAllgather) {
            return nullptr;
        }
        if (count == SIZE_MAX) {
            count = static_cast<size_t>(key.numel());
        }
        EfKey id{key.storage().data(), key.storage_offset(), key.numel(),
                 static_cast<int>(key.scalar_type())};
        if (comp_.ef == kEfOrder) {
            const uint64_t ord = ordinal_[k].load();
            if (ord >= comp_.efCapacity) {
                GS_REFUSE(kCollKindName[k], ": error_feedback='order' keys a residual by the "
                          "call's place in the training step, and this is compressed ",
                          kCollKindName[k], " call ", ord + 1, " since the group was made or "
                          "gradsync.torch.next_step(group) was last called, past ef_capacity=",
                          comp_.efCapacity, "; call gradsync.torch.next_step(group) once per "
                          "step (after optimizer.step()), or raise ef_capacity if one step "
                          "makes more calls than that");
            }
            ordinal_[k]++;
            id = EfKey{nullptr, static_cast<int64_t>(ord), static_cast<int64_t>(k), -1};
        }
        // The f32 residual; a compressed all-reduce also keeps its own chunk's (about
        // 1/size of it) for the reduced sum.
        size_t bytes = 4 * count;
        if (k == kAllreduce) {
            bytes += 4 * ((count + getSize() - 1) / getSize());
        }
        auto lease = efTable_.lease(id, count, dtype, bytes, comp_.efCapacity,
                                    comp_.efCapacityBytes, stats_);
        if (!lease) {
            return nullptr;
        }
        gs_ef_t ef = lease->entry->ef;
        w->efs_.push_back(std::move(lease));
        return ef;
    }

    // The flags of a compressed call: never GS_COLL_F_STREAM_ORDERED (gradsync refuses it
    // with a codec: a compressed call on device buffers reads its payload checks back on
    // the host), so on the NCCL path it runs as a plain call the Work finishes on the host.
    static unsigned compressedFlags(unsigned flags, const gs_codec_config_t *codec)
    {
        return codec != nullptr ? (flags & ~GS_COLL_F_STREAM_ORDERED) : flags;
    }

    // Issue @call; when it was compressed and gradsync says the codec cannot run there
    // (GS_ERR_UNSUPPORTED, e.g. a device path without it: refused before any byte moves,
    // alike on every rank), @plain drops the codec and it is issued again.
    template <typename Call, typename Plain>
    gs_status_t withFallback(CollKind k, const char *what, bool compressed, Call &&call,
                             Plain &&plain)
    {
        gs_status_t st = call();
        if (compressed && st == GS_ERR_UNSUPPORTED) {
            const char *why = gs_last_error();
            stats_.compressed[k]--;
            uncompressed(k, what, std::string("gradsync: ") + (why ? why : "unsupported"));
            plain();
            st = call();
        }
        return st;
    }

    // Count one tensor of @k run uncompressed, and say why once per reason (INFO).
    void uncompressed(CollKind k, const char *what, const std::string &why)
    {
        stats_.uncompressed[k]++;
        std::string line = std::string(what) + ": " + why;
        {
            std::lock_guard<std::mutex> lock(logMu_);
            if (!logged_.insert(line).second) {
                return;
            }
        }
        LOG(INFO) << "gradsync backend: " << line << " runs uncompressed (the group's "
                  << kCollKindName[k] << " codec cannot serve it)";
    }

    gs_comm_t comm_;
    std::shared_ptr<Completer> completer_;
    c10::intrusive_ptr<Options> options_;
    Compression comp_;
    CompStats stats_;
    EfTable efTable_;
    std::atomic<uint64_t> ordinal_[kCollKinds] = {}; // error_feedback="order": calls this step
    std::mutex logMu_;
    std::set<std::string> logged_;
    std::mutex lifeMu_;
    std::mutex coalMu_;
    bool coalescing_ = false;
    std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
    bool streamOrdered_ = true; // until gradsync says the device path cannot
#ifdef GS_TORCH_CUDA
    std::mutex streamMu_;
    std::vector<std::unique_ptr<c10::cuda::CUDAStream>> streams_;
#endif

    void checkRoot(int64_t root, const char *what) const
    {
        if (root < 0 || root >= getSize()) {
            GS_REFUSE(what, ": root ", root, " is outside 0..", getSize() - 1);
        }
    }

    void checkPeer(int peer, const char *what) const
    {
        if (peer < 0 || peer >= getSize()) {
            GS_REFUSE(what, ": peer ", peer, " is outside 0..", getSize() - 1);
        }
    }

    // The root's list of a gather (outputs) or scatter (inputs): one list of a tensor per
    // rank, each like @mine; the other ranks pass none. Returns every tensor of the call.
    std::vector<at::Tensor> rootList(const std::vector<std::vector<at::Tensor>> &lists,
                                     const at::Tensor &mine, bool root, const char *what,
                                     const char *side) const
    {
        std::vector<at::Tensor> all{mine};
        if (!root) {
            if (!lists.empty() && !lists[0].empty()) {
                GS_REFUSE(what, ": only the root passes ", side, " tensors");
            }
            return all;
        }
        if (lists.size() != 1 || lists[0].size() != static_cast<size_t>(getSize())) {
            GS_REFUSE(what, " needs one list of ", getSize(), " ", side,
                      " tensors at the root");
        }
        for (const auto &t : lists[0]) {
            sameShape(t, mine, what);
            all.push_back(t);
        }
        return all;
    }

    // Once @w has finished: rank i's block of @flat (n elements each) into outs[i].
    static void copyOutAfter(const WorkPtr &w, std::vector<at::Tensor> outs, at::Tensor flat,
                             int64_t n)
    {
        w->after_ = [outs = std::move(outs), flat = std::move(flat), n]() mutable {
            for (size_t i = 0; i < outs.size(); i++) {
                outs[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view_as(outs[i]));
            }
        };
    }

    static void sameShape(const at::Tensor &a, const at::Tensor &b, const char *what)
    {
        if (a.numel() != b.numel() || a.scalar_type() != b.scalar_type()) {
            GS_REFUSE(what, ": tensors of ", a.numel(), " x ", a.scalar_type(), " and ",
                      b.numel(), " x ", b.scalar_type(), " in one call; every one must match");
        }
    }

    std::vector<size_t> splitCounts(const std::vector<int64_t> &splits, const at::Tensor &t,
                                    const char *what, const char *side) const
    {
        const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
        const int64_t row = rows > 0 ? t.numel() / rows : 0;
        const size_t es = static_cast<size_t>(t.element_size());
        std::vector<size_t> out;
        if (splits.empty()) {
            if (rows % getSize() != 0) {
                GS_REFUSE(what, ": ", rows, " ", side, " rows do not split into ", getSize(),
                          " equal blocks");
            }
            out.assign(getSize(), static_cast<size_t>(rows / getSize() * row) * es);
            return out;
        }
        if (splits.size() != static_cast<size_t>(getSize())) {
            GS_REFUSE(what, ": ", splits.size(), " ", side, " split sizes for ", getSize(),
                      " ranks");
        }
        int64_t sum = 0;
        for (int64_t s : splits) {
            if (s < 0) {
                GS_REFUSE(what, ": a negative ", side, " split size (", s, ")");
            }
            sum += s;
            out.push_back(static_cast<size_t>(s * row) * es);
        }
        if (sum != rows) {
            GS_REFUSE(what, ": ", side, " split sizes add up to ", sum, ", the tensor has ", rows,
                      " rows");
        }
        return out;
    }

    WorkPtr newWork(OpType type, const char *what, std::vector<at::Tensor> outputs,
                    c10::DeviceType dev)
    {
        std::vector<c10::Device> devices;
        if (dev == c10::DeviceType::CUDA && !outputs.empty()) {
            devices.push_back(outputs[0].device());
        }
        auto w = c10::make_intrusive<GsWork>(getRank(), type, what, std::move(outputs),
                                             std::move(devices));
        w->completer_ = completer_;
        {
            std::lock_guard<std::mutex> lock(coalMu_);
            w->inline_ = tlsSync && dev == c10::DeviceType::CPU && !coalescing_;
        }
        return w;
    }

    // A contiguous buffer for an in-place tensor; a non-contiguous CPU one is
    // staged and copied back when the op has finished.
    static at::Tensor staged(const WorkPtr &w, const at::Tensor &t)
    {
        if (t.is_contiguous()) {
            w->keep_.push_back(t);
            return t;
        }
        at::Tensor c = t.contiguous();
        w->keep_.push_back(c);
        auto prev = w->after_;
        w->after_ = [prev, t, c]() mutable {
            if (prev) {
                prev();
            }
            t.copy_(c);
        };
        return c;
    }

    // Start one non-blocking gradsync call on @w (host or device buffers).
    template <typename F> void start(const WorkPtr &w, c10::DeviceType dev, F &&issue)
    {
        gs_request_t r = GS_REQUEST_NULL;
        gs_coll_opts_t o = GS_COLL_OPTS_INIT;
        if (w->inline_) {
            const gs_status_t st = issue(&o, nullptr); // the blocking twin
            if (st != GS_OK) {
                failed(w->what(), st);
            }
            return;
        }
#ifdef GS_TORCH_CUDA
        if (dev == c10::DeviceType::CUDA) {
            o.stream = deviceStream(w).stream();
            if (streamOrdered_) {
                o.flags = GS_COLL_F_STREAM_ORDERED;
                gs_status_t st = issue(&o, &r);
                if (st == GS_ERR_UNSUPPORTED) {
                    streamOrdered_ = false; // the staged path: host completion
                    o.flags = 0;
                    r = GS_REQUEST_NULL;
                } else {
                    startedOrFail(w, st, r);
                    return;
                }
            }
        }
#else
        (void)dev;
#endif
        const gs_status_t st = issue(&o, &r); // before r is read
        startedOrFail(w, st, r);
    }

    // Allreduce (or ALLREDUCE_COALESCED) of in-place tensors, one request each.
    template <typename F>
    c10::intrusive_ptr<c10d::Work> startEach(const WorkPtr &w, c10::DeviceType dev, size_t n,
                                             F &&issueOne)
    {
        for (size_t i = 0; i < n; i++) {
            start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
                return issueOne(i, o, r);
            });
        }
        return finishStart(w, dev);
    }

    void startedOrFail(const WorkPtr &w, gs_status_t st, gs_request_t r)
    {
        if (st != GS_OK) {
            // The requests already started are released first (bounded).
            if (w->claim()) {
                (void)gs_waitall(w->reqs_.size(), w->reqs_.data());
                w->reqs_.clear();
            }
            failed(w->what(), st);
        }
        w->reqs_.push_back(r);
    }

    c10::intrusive_ptr<c10d::Work> finishStart(const WorkPtr &w, c10::DeviceType dev)
    {
        if (w->inline_) {
            w->completeNow(); // the copy-outs, the future
            return track(w);
        }
#ifdef GS_TORCH_CUDA
        if (dev == c10::DeviceType::CUDA) {
            auto &s = deviceStream(w);
            for (const auto &t : w->keep_) {
                if (t.defined() && t.is_cuda()) {
                    c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), s);
                }
            }
            if (streamOrdered_) {
                w->done_ = std::make_shared<at::cuda::CUDAEvent>();
                w->done_->record(s);
                c10::cuda::CUDAStreamGuard guard(s);
                w->completeNow(); // the future's waiters follow the stream
            }
        }
#else
        (void)dev;
#endif
        return track(w);
    }

    c10::intrusive_ptr<c10d::Work> track(const WorkPtr &w)
    {
        std::lock_guard<std::mutex> lock(coalMu_);
        if (coalescing_) {
            coalesced_.push_back(w);
        }
        return w;
    }

#ifdef GS_TORCH_CUDA
    // The backend's stream for the work's device, made to wait for the
    // caller's current stream first.
    c10::cuda::CUDAStream &deviceStream(const WorkPtr &w)
    {
        const auto dev = c10::cuda::current_device();
        std::lock_guard<std::mutex> lock(streamMu_);
        if (streams_.size() <= static_cast<size_t>(dev)) {
            streams_.resize(dev + 1);
        }
        if (!streams_[dev]) {
            streams_[dev] = std::make_unique<c10::cuda::CUDAStream>(
                c10::cuda::getStreamFromPool(false, dev));
        }
        if (!w->fenced_) {
            at::cuda::CUDAEvent ready;
            ready.record(c10::cuda::getCurrentCUDAStream(dev));
            ready.block(*streams_[dev]);
            w->fenced_ = true;
        }
        return *streams_[dev];
    }
#endif

    c10::intrusive_ptr<c10d::Work> allreduceMany(const std::vector<at::Tensor> &tensors,
                                                 const c10d::ReduceOp &rop, OpType type,
                                                 const char *what)
    {
        const c10::DeviceType dev = deviceOf(tensors, what);
        std::vector<Elem> elems;
        std::vector<Reduce> ops;
        for (const auto &t : tensors) {
            elems.push_back(reduceElem(t, what));
            ops.push_back(reduceOp(rop, t, what));
        }
        auto w = newWork(type, what, tensors, dev);
        std::vector<at::Tensor> bufs;
        std::vector<const gs_codec_config_t *> codecs;
        std::vector<gs_ef_t> efs;
        for (size_t i = 0; i < tensors.size(); i++) {
            bufs.push_back(staged(w, tensors[i]));
            if (ops[i].scaled) {
                bufs[i].mul_(ops[i].premul);
            }
            codecs.push_back(codecFor(kAllreduce, tensors[i], ops[i].op, what));
            efs.push_back(codecs[i] ? efFor(w, kAllreduce, tensors[i], elems[i].dtype) : nullptr);
        }
        return startEach(w, dev, bufs.size(),
                         [&](size_t i, const gs_coll_opts_t *o, gs_request_t *r) {
                             gs_allreduce_opts_t ao = GS_ALLREDUCE_OPTS_INIT;
                             ao.stream = o->stream;
                             ao.flags = o->flags;
                             auto call = [&]() {
                                 return r ? gs_iallreduce_ex(comm_, bufs[i].data_ptr(),
                                                             bufs[i].data_ptr(),
                                                             bufs[i].numel() * elems[i].per,
                                                             elems[i].dtype, ops[i].op, &ao, r)
                                          : gs_allreduce_ex(comm_, bufs[i].data_ptr(),
                                                            bufs[i].data_ptr(),
                                                            bufs[i].numel() * elems[i].per,
                                                            elems[i].dtype, ops[i].op, &ao);
                             };
                             ao.codec = codecs[i];
                             ao.ef = efs[i];
                             ao.flags = compressedFlags(o->flags, codecs[i]);
                             return withFallback(kAllreduce, what, codecs[i] != nullptr, call,
                                                 [&]() {
                                                     ao.codec = nullptr;
                                                     ao.ef = nullptr;
                                                     ao.flags = o->flags;
                                                 });
                         });
    }

    c10::intrusive_ptr<c10d::Work> allgatherMany(std::vector<at::Tensor> &outputs,
                                                 std::vector<at::Tensor> &inputs, OpType type,
                                                 const char *what)
    {
        if (outputs.size() != inputs.size() || inputs.empty()) {
            GS_REFUSE(what, ": ", outputs.size(), " outputs for ", inputs.size(), " inputs");
        }
        std::vector<at::Tensor> all = outputs;
        all.insert(all.end(), inputs.begin(), inputs.end());
        const c10::DeviceType dev = deviceOf(all, what);
        for (size_t i = 0; i < inputs.size(); i++) {
            if (outputs[i].numel() != inputs[i].numel() * getSize() ||
                outputs[i].scalar_type() != inputs[i].scalar_type()) {
                GS_REFUSE(what, ": the output must hold ", getSize(), " x the input (",
                          inputs[i].numel(), " x ", inputs[i].scalar_type(), "), it has ",
                          outputs[i].numel(), " x ", outputs[i].scalar_type());
            }
        }
        auto w = newWork(type, what, outputs, dev);
        std::vector<at::Tensor> sends, recvs;
        std::vector<const gs_codec_config_t *> codecs;
        for (size_t i = 0; i < inputs.size(); i++) {
            sends.push_back(inputs[i].contiguous());
            w->keep_.push_back(sends.back());
            recvs.push_back(staged(w, outputs[i]));
            codecs.push_back(codecFor(kAllgather, inputs[i], GS_OP_SUM, what));
        }
        return startEach(w, dev, sends.size(),
                         [&](size_t i, const gs_coll_opts_t *o, gs_request_t *r) {
                             return allgatherOne(sends[i], recvs[i], codecs[i], what, o, r);
                         });
    }

    // One all-gather of @send into @recv: compressed with @codec (a float tensor, counted
    // in its own elements), else as bytes.
    gs_status_t allgatherOne(const at::Tensor &send, const at::Tensor &recv,
                             const gs_codec_config_t *codec, const char *what,
                             const gs_coll_opts_t *o, gs_request_t *r)
    {
        gs_coll_opts_t co = *o;
        Elem e = moveElem(send);
        auto call = [&]() {
            return r ? gs_iallgather_ex(comm_, send.data_ptr(), recv.data_ptr(),
                                        send.numel() * e.per, e.dtype, &co, r)
                     : gs_allgather_ex(comm_, send.data_ptr(), recv.data_ptr(),
                                       send.numel() * e.per, e.dtype, &co);
        };
        if (codec != nullptr) {
            (void)floatDtype(send, &e.dtype);
            e.per = 1;
            co.codec = codec;
            co.flags = compressedFlags(o->flags, codec);
        }
        return withFallback(kAllgather, what, codec != nullptr, call, [&]() {
            e = moveElem(send);
            co.codec = nullptr;
            co.flags = o->flags;
        });
    }

    // @keys: the tensors whose identity keys each input's error feedback (default: the
    // inputs themselves; reduce_scatter's list form passes the first tensor of each list,
    // its input being a fresh concatenation).
    c10::intrusive_ptr<c10d::Work> reduceScatterMany(std::vector<at::Tensor> &outputs,
                                                     std::vector<at::Tensor> &inputs,
                                                     const c10d::ReduceOp &rop, OpType type,
                                                     const char *what,
                                                     const std::vector<at::Tensor> *keys = nullptr)
    {
        if (outputs.size() != inputs.size() || inputs.empty()) {
            GS_REFUSE(what, ": ", outputs.size(), " outputs for ", inputs.size(), " inputs");
        }
        std::vector<at::Tensor> all = outputs;
        all.insert(all.end(), inputs.begin(), inputs.end());
        const c10::DeviceType dev = deviceOf(all, what);
        std::vector<Elem> elems;
        std::vector<Reduce> ops;
        for (size_t i = 0; i < inputs.size(); i++) {
            if (inputs[i].numel() != outputs[i].numel() * getSize() ||
                outputs[i].scalar_type() != inputs[i].scalar_type()) {
                GS_REFUSE(what, ": the input must hold ", getSize(), " x the output (",
                          outputs[i].numel(), " x ", outputs[i].scalar_type(), "), it has ",
                          inputs[i].numel(), " x ", inputs[i].scalar_type());
            }
            elems.push_back(reduceElem(inputs[i], what));
            ops.push_back(reduceOp(rop, inputs[i], what));
        }
        auto w = newWork(type, what, outputs, dev);
        std::vector<at::Tensor> sends, recvs;
        std::vector<const gs_codec_config_t *> codecs;
        std::vector<gs_ef_t> efs;
        for (size_t i = 0; i < inputs.size(); i++) {
            at::Tensor s = inputs[i].contiguous();
            if (ops[i].scaled) {
                s = s.mul(ops[i].premul); // a copy: the caller's input stays as it was
            }
            sends.push_back(s);
            w->keep_.push_back(s);
            recvs.push_back(staged(w, outputs[i]));
            codecs.push_back(codecFor(kReduceScatter, inputs[i], ops[i].op, what));
            const at::Tensor &key = keys ? (*keys)[i] : inputs[i];
            efs.push_back(codecs[i] ? efFor(w, kReduceScatter, key, elems[i].dtype,
                                            static_cast<size_t>(s.numel()))
                                    : nullptr);
        }
        return startEach(w, dev, sends.size(),
                         [&](size_t i, const gs_coll_opts_t *o, gs_request_t *r) {
                             gs_coll_opts_t co = *o;
                             auto call = [&]() {
                                 return r ? gs_ireduce_scatter_ex(comm_, sends[i].data_ptr(),
                                                                  recvs[i].data_ptr(),
                                                                  recvs[i].numel() * elems[i].per,
                                                                  elems[i].dtype, ops[i].op, &co, r)
                                          : gs_reduce_scatter_ex(comm_, sends[i].data_ptr(),
                                                                 recvs[i].data_ptr(),
                                                                 recvs[i].numel() * elems[i].per,
                                                                 elems[i].dtype, ops[i].op, &co);
                             };
                             co.codec = codecs[i];
                             co.ef = efs[i];
                             co.flags = compressedFlags(o->flags, codecs[i]);
                             return withFallback(kReduceScatter, what, codecs[i] != nullptr, call,
                                                 [&]() {
                                                     co.codec = nullptr;
                                                     co.ef = nullptr;
                                                     co.flags = o->flags;
                                                 });
                         });
    }

    c10::intrusive_ptr<c10d::Work> recvFrom(std::vector<at::Tensor> &tensors, int src, int tag,
                                            OpType type, const char *what)
    {
        const at::Tensor &t = one(tensors, what);
        const c10::DeviceType dev = deviceOf(tensors, what);
        auto w = newWork(type, what, tensors, dev);
        at::Tensor buf = staged(w, t);
        w->checkRecv_ = true;
        w->expectBytes_ = static_cast<size_t>(buf.numel()) * buf.element_size();
        if (dev == c10::DeviceType::CPU) {
            gs_request_t r = GS_REQUEST_NULL;
            const gs_status_t st =
                gs_irecv_status(comm_, buf.data_ptr(), w->expectBytes_, GS_DTYPE_U8, src,
                                static_cast<uint32_t>(tag), &w->pstatus_, &r);
            startedOrFail(w, st, r);
            return track(w);
        }
        if (src == GS_ANY_SOURCE) {
            GS_REFUSE(what, ": CUDA tensors need a named source rank");
        }
        w->checkRecv_ = false;
        start(w, dev, [&](const gs_coll_opts_t *o, gs_request_t *r) {
            return gs_irecv_ex(comm_, buf.data_ptr(), w->expectBytes_, GS_DTYPE_U8, src,
                               static_cast<uint32_t>(tag), o, r);
        });
        w->pstatus_.source = src;
        return finishStart(w, dev);
    }
};

// ---- Python entry points ------------------------------------------------

// The default group's backend: a communicator from gradsync's rendezvous at
// master_addr:master_port (agreed through torch's store by the caller).
c10::intrusive_ptr<c10d::Backend> createBackend(int rank, int size, const std::string &addr,
                                                int port, int64_t timeoutMs,
                                                const std::string &jobId)
{
    gs_config_t cfg;
    gs_comm_t comm = nullptr;
    check(gs_config_init_v(&cfg, GS_VERSION_NUMBER, sizeof(cfg)), "configuration");
    cfg.rank = rank;
    cfg.world_size = size;
    cfg.master_addr = addr.c_str();
    cfg.master_port = port;
    if (timeoutMs > 0) {
        cfg.timeout_ms = static_cast<int>(std::min<int64_t>(timeoutMs, INT32_MAX));
    }
    cfg.job_id = jobId.empty() ? nullptr : jobId.c_str();
    gs_status_t st;
    {
        py::gil_scoped_release nogil; // the rendezvous waits for the other ranks
        st = gs_comm_init(&comm, &cfg);
    }
    check(st, "init (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")");
    return c10::make_intrusive<Backend>(comm, rank, size,
                                        std::chrono::milliseconds(timeoutMs > 0 ? timeoutMs : 0));
}

// A group of the parent's @ranks (a gradsync backend's), made by them alone.
c10::intrusive_ptr<c10d::Backend> createGroup(const c10::intrusive_ptr<c10d::Backend> &parent,
                                              const std::vector<int> &ranks, uint32_t tag,
                                              int64_t timeoutMs)
{
    auto *p = dynamic_cast<Backend *>(parent.get());
    TORCH_CHECK(p != nullptr, "gradsync backend: the parent of a new group must be a gradsync "
                              "backend, got ",
                parent->getBackendName());
    py::gil_scoped_release nogil;
    return p->createGroup(ranks, tag, std::chrono::milliseconds(timeoutMs));
}

// The gs_comm_t of a gradsync backend, as an integer (the DDP hook borrows it).
uintptr_t commHandle(const c10::intrusive_ptr<c10d::Backend> &b)
{
    auto *p = dynamic_cast<Backend *>(b.get());
    TORCH_CHECK(p != nullptr, "gradsync backend: not a gradsync backend: ", b->getBackendName());
    TORCH_CHECK(p->comm() != nullptr, "gradsync backend: the group was shut down");
    return reinterpret_cast<uintptr_t>(p->comm());
}

Backend *gradsyncOf(const c10::intrusive_ptr<c10d::Backend> &b)
{
    auto *p = dynamic_cast<Backend *>(b.get());
    TORCH_CHECK(p != nullptr, "gradsync backend: not a gradsync backend: ", b->getBackendName());
    return p;
}

// A codec configuration from its address (a gradsync.Codec's gs_codec_config_t), copied:
// the fields the caller's struct has, over GS_CODEC_CONFIG_INIT's.
bool codecAt(uintptr_t addr, gs_codec_config_t *out)
{
    gs_codec_config_t init = GS_CODEC_CONFIG_INIT;
    *out = init;
    if (addr == 0) {
        return false;
    }
    const auto *src = reinterpret_cast<const gs_codec_config_t *>(addr);
    const size_t n = std::min(src->size, sizeof(gs_codec_config_t));
    std::memcpy(out, src, n);
    out->size = sizeof(gs_codec_config_t);
    return out->kind != GS_CODEC_NONE;
}

// gradsync.torch.Options on a new backend (before torch runs anything on it).
void setOptions(const c10::intrusive_ptr<c10d::Backend> &b, uintptr_t allreduce,
                uintptr_t reduceScatter, uintptr_t allgather, const std::string &errorFeedback,
                int64_t efCapacity, int64_t efCapacityBytes)
{
    TORCH_CHECK(efCapacity > 0, "gradsync backend: ef_capacity must be positive, got ",
                efCapacity);
    TORCH_CHECK(efCapacityBytes > 0, "gradsync backend: ef_capacity_bytes must be positive, got ",
                efCapacityBytes);
    Compression c;
    const uintptr_t addrs[kCollKinds] = {allreduce, reduceScatter, allgather};
    for (int k = 0; k < kCollKinds; k++) {
        c.on[k] = codecAt(addrs[k], &c.cfg[k]);
    }
    if (errorFeedback == "off") {
        c.ef = kEfOff;
    } else if (errorFeedback == "tensor") {
        c.ef = kEfTensor;
    } else if (errorFeedback == "order") {
        c.ef = kEfOrder;
    } else {
        TORCH_CHECK(false, "gradsync backend: error_feedback must be 'off', 'tensor' or 'order', "
                    "not '", errorFeedback, "'");
    }
    c.efCapacity = static_cast<size_t>(efCapacity);
    c.efCapacityBytes = static_cast<size_t>(efCapacityBytes);
    gradsyncOf(b)->setCompression(c);
}

void nextStep(const c10::intrusive_ptr<c10d::Backend> &b) { gradsyncOf(b)->nextStep(); }

std::map<std::string, uint64_t> compressionStats(const c10::intrusive_ptr<c10d::Backend> &b)
{
    return gradsyncOf(b)->compressionStats();
}

bool isGradsync(const c10::intrusive_ptr<c10d::Backend> &b)
{
    return dynamic_cast<Backend *>(b.get()) != nullptr;
}

std::string libraryVersion() { return gs_version_string(); }

} // namespace gradsync_torch

PYBIND11_MODULE(_C, m)
{
    py::module::import("torch.distributed");
    m.doc() = "gradsync's torch.distributed backend (a c10d::Backend); use gradsync.torch";
    m.def("create_backend", &gradsync_torch::createBackend, py::arg("rank"), py::arg("size"),
          py::arg("master_addr"), py::arg("master_port"), py::arg("timeout_ms"),
          py::arg("job_id"));
    m.def("create_group", &gradsync_torch::createGroup, py::arg("parent"), py::arg("ranks"),
          py::arg("tag"), py::arg("timeout_ms"));
    m.def("is_gradsync", &gradsync_torch::isGradsync, py::arg("backend"));
    m.def("comm_handle", &gradsync_torch::commHandle, py::arg("backend"));
    m.def("library_version", &gradsync_torch::libraryVersion);
    m.def("set_options", &gradsync_torch::setOptions, py::arg("backend"), py::arg("allreduce"),
          py::arg("reduce_scatter"), py::arg("allgather"), py::arg("error_feedback"),
          py::arg("ef_capacity"), py::arg("ef_capacity_bytes"));
    m.def("next_step", &gradsync_torch::nextStep, py::arg("backend"));
    m.def("compression_stats", &gradsync_torch::compressionStats, py::arg("backend"));
#ifdef GS_TORCH_CUDA
    m.attr("cuda") = true;
#else
    m.attr("cuda") = false;
#endif
}
