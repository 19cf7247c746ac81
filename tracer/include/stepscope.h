/*
 * stepscope.h — the public interface of libstepscope, and its manual.
 *
 * libstepscope is the only code that knows how trace records are encoded
 * (docs/trace-format.md is the byte-level specification). It offers:
 *
 *   1. The record model: one C struct per record kind (kernel, memcpy,
 *      collective, host operation, NVTX-style range, ...), gathered in the
 *      tagged union `stepscope_record`. Writers fill it, readers return it.
 *   2. A writer (`stepscope_writer_*`): thread-safe appends from many threads
 *      without a global lock on the hot path; independent zstd frames closed
 *      every few MB or every 200 ms; a crash loses at most the unfinished
 *      frame (plus what was still in per-thread buffers, at most about
 *      `flush_interval_ms` of activity). A closed file ends with an END
 *      record, so readers tell it from the file of a process that died.
 *   3. A streaming reader (`stepscope_reader_*`): validates every length,
 *      index and string id, skips unknown record kinds, reads a truncated
 *      file up to its last complete frame with a warning. Errors name the
 *      file, the byte offset and what was expected. It never aborts.
 *   4. The process-wide "linked" API (`stepscope_start`, `stepscope_stop`,
 *      ranges, marks, counters, metadata, host operations): what the trainer,
 *      the CPU backend and user code call. Every call is a cheap no-op while
 *      no trace is started, and the tracer never takes the process down: on
 *      failure it warns once on stderr and goes quiet. SIGTERM, SIGINT and
 *      SIGHUP flush the trace before the program's own handling of them.
 *
 * Conventions
 *   - Times are unsigned 64-bit nanoseconds in the file's *trace clock*
 *     (header.clock_domain). Clock-anchor records relate the trace clock to
 *     CLOCK_REALTIME and CLOCK_MONOTONIC so that ranks can be aligned.
 *   - Strings inside records are *string ids* (uint32_t) interned once per
 *     file with `stepscope_intern`; id 0 means "no string".
 *   - Functions that can fail return 0 on success and a negative
 *     `stepscope_status` on failure, filling an optional `stepscope_error`.
 */
#ifndef STEPSCOPE_H
#define STEPSCOPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libstepscope.so exports: the functions declared here and nothing else (the library
 * is built with hidden visibility, so its internals never reach a traced program). */
#define STEPSCOPE_EXPORT __attribute__((visibility("default")))

#define STEPSCOPE_FORMAT_MAJOR   1
#define STEPSCOPE_FORMAT_MINOR   1 /* 1.1: writers end a closed file with an END record */
#define STEPSCOPE_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

typedef enum stepscope_status {
  STEPSCOPE_OK = 0,
  STEPSCOPE_E_IO = -1,       /* open/read/write failed (errno text in message) */
  STEPSCOPE_E_FORMAT = -2,   /* the bytes are not what the format says */
  STEPSCOPE_E_VERSION = -3,  /* a newer major format version */
  STEPSCOPE_E_NOMEM = -4,    /* an allocation failed */
  STEPSCOPE_E_ARGUMENT = -5, /* the caller passed something invalid */
  STEPSCOPE_E_COMPRESS = -6, /* zstd reported an error */
  STEPSCOPE_E_LIMIT = -7,    /* a size limit of the format was exceeded */
  STEPSCOPE_E_STATE = -8     /* call not valid in the current state */
} stepscope_status;

typedef struct stepscope_error {
  int code;          /* a stepscope_status */
  uint64_t offset;   /* byte offset in the (compressed) file, when relevant */
  char message[512]; /* "FILE: offset N: expected X, found Y" */
} stepscope_error;

/* A short English name for a status code. */
STEPSCOPE_EXPORT const char *stepscope_status_name(int status);

/* ------------------------------------------------------------------------ */
/* The record model                                                          */
/* ------------------------------------------------------------------------ */

/* Wire kinds. Values are part of the format: never renumber, only add. */
typedef enum stepscope_record_kind {
  STEPSCOPE_REC_HEADER = 1,   /* first record of every file */
  STEPSCOPE_REC_BLOCK = 2,    /* starts a writer-thread block; resets delta state */
  STEPSCOPE_REC_STRING = 3,   /* defines an interned string id */
  STEPSCOPE_REC_METADATA = 4, /* key -> JSON value (run configuration, FLOPs...) */
  STEPSCOPE_REC_STREAM = 5,   /* names a lane: GPU stream, CPU stream, host thread */
  STEPSCOPE_REC_KERNEL = 16,
  STEPSCOPE_REC_MEMCPY = 17,
  STEPSCOPE_REC_MEMSET = 18,
  STEPSCOPE_REC_SYNC = 19,
  STEPSCOPE_REC_API = 20,        /* runtime/driver call, or a host-side enqueue */
  STEPSCOPE_REC_RANGE = 21,      /* NVTX-style range with start and end */
  STEPSCOPE_REC_MARK = 22,       /* NVTX-style instant */
  STEPSCOPE_REC_COLLECTIVE = 23, /* collective or point-to-point operation */
  STEPSCOPE_REC_HOST_OP = 24,    /* an operation executed on a CPU-backend stream */
  STEPSCOPE_REC_COUNTER = 25,
  STEPSCOPE_REC_MEMORY = 26,  /* allocation / free */
  STEPSCOPE_REC_DROPPED = 27, /* records lost by a source */
  STEPSCOPE_REC_CLOCK_ANCHOR = 28,
  STEPSCOPE_REC_OVERHEAD = 29, /* time the tracer itself cost (CUPTI overhead records) */
  STEPSCOPE_REC_EXTERNAL_CORRELATION = 30, /* a correlation id tied to an outside id (CUPTI) */
  STEPSCOPE_REC_END = 31 /* the last record of a file whose writer was closed (1.1) */
} stepscope_record_kind;

#define STEPSCOPE_REC_KIND_MAX 64 /* kinds are < this; readers skip unknown ones */

/* Activity category of an operation on a stream. */
typedef enum stepscope_category {
  STEPSCOPE_CAT_NONE = 0,
  STEPSCOPE_CAT_COMPUTE = 1,
  STEPSCOPE_CAT_COMM = 2,   /* communication: collectives, p2p, their copies */
  STEPSCOPE_CAT_MEMCPY = 3, /* copies that are not communication */
  STEPSCOPE_CAT_MEMSET = 4,
  STEPSCOPE_CAT_SYNC = 5, /* waiting on an event or another stream */
  STEPSCOPE_CAT_OTHER = 6
} stepscope_category;

typedef enum stepscope_stream_kind {
  STEPSCOPE_STREAM_GPU = 1,        /* a CUDA stream */
  STEPSCOPE_STREAM_CPU = 2,        /* a CPU-backend stream (worker thread) */
  STEPSCOPE_STREAM_HOST_THREAD = 3 /* an OS thread issuing work (API calls, ranges) */
} stepscope_stream_kind;

typedef enum stepscope_collective_op {
  STEPSCOPE_COLL_UNKNOWN = 0,
  STEPSCOPE_COLL_ALLREDUCE = 1,
  STEPSCOPE_COLL_REDUCESCATTER = 2,
  STEPSCOPE_COLL_ALLGATHER = 3,
  STEPSCOPE_COLL_BROADCAST = 4,
  STEPSCOPE_COLL_REDUCE = 5,
  STEPSCOPE_COLL_ALLTOALL = 6,
  STEPSCOPE_COLL_SEND = 7,
  STEPSCOPE_COLL_RECV = 8,
  STEPSCOPE_COLL_BARRIER = 9
} stepscope_collective_op;

typedef enum stepscope_datatype {
  STEPSCOPE_DT_UNKNOWN = 0,
  STEPSCOPE_DT_INT8,
  STEPSCOPE_DT_UINT8,
  STEPSCOPE_DT_INT32,
  STEPSCOPE_DT_UINT32,
  STEPSCOPE_DT_INT64,
  STEPSCOPE_DT_UINT64,
  STEPSCOPE_DT_FLOAT16,
  STEPSCOPE_DT_FLOAT32,
  STEPSCOPE_DT_FLOAT64,
  STEPSCOPE_DT_BFLOAT16,
  STEPSCOPE_DT_FP8_E4M3,
  STEPSCOPE_DT_FP8_E5M2
} stepscope_datatype;

typedef enum stepscope_memcpy_kind {
  STEPSCOPE_MEMCPY_UNKNOWN = 0,
  STEPSCOPE_MEMCPY_HTOD = 1,
  STEPSCOPE_MEMCPY_DTOH = 2,
  STEPSCOPE_MEMCPY_DTOD = 3,
  STEPSCOPE_MEMCPY_HTOH = 4,
  STEPSCOPE_MEMCPY_PTOP = 5
} stepscope_memcpy_kind;

typedef enum stepscope_sync_kind {
  STEPSCOPE_SYNC_UNKNOWN = 0,
  STEPSCOPE_SYNC_EVENT = 1,             /* cudaEventSynchronize: host waits on an event */
  STEPSCOPE_SYNC_STREAM_WAIT_EVENT = 2, /* a stream waits on an event of another stream */
  STEPSCOPE_SYNC_STREAM = 3,            /* host waits for a stream */
  STEPSCOPE_SYNC_CONTEXT = 4            /* host waits for the device */
} stepscope_sync_kind;

typedef enum stepscope_api_kind {
  STEPSCOPE_API_RUNTIME = 1,
  STEPSCOPE_API_DRIVER = 2,
  STEPSCOPE_API_HOST_ENQUEUE = 3 /* CPU backend: an operation queued on a stream */
} stepscope_api_kind;

typedef enum stepscope_payload_kind {
  STEPSCOPE_PAYLOAD_NONE = 0,
  STEPSCOPE_PAYLOAD_UINT64 = 1,
  STEPSCOPE_PAYLOAD_INT64 = 2,
  STEPSCOPE_PAYLOAD_DOUBLE = 3 /* bits of the double stored in `payload` */
} stepscope_payload_kind;

typedef enum stepscope_memory_kind {
  STEPSCOPE_MEM_ALLOC = 1,
  STEPSCOPE_MEM_FREE = 2
} stepscope_memory_kind;

typedef enum stepscope_drop_source {
  STEPSCOPE_DROP_WRITER = 1, /* the writer could not buffer or write */
  STEPSCOPE_DROP_CUPTI = 2,
  STEPSCOPE_DROP_NVTX = 3,
  STEPSCOPE_DROP_NCCL = 4
} stepscope_drop_source;

/* Why a writer closed its file (END records). */
typedef enum stepscope_end_reason {
  STEPSCOPE_END_CLOSED = 1, /* the program closed the trace (stepscope_stop, writer close) */
  STEPSCOPE_END_SIGNAL = 2  /* a terminating signal stopped the program; the trace was
                               flushed and closed on its way out */
} stepscope_end_reason;

typedef enum stepscope_clock_domain {
  STEPSCOPE_CLOCK_MONOTONIC = 1, /* CLOCK_MONOTONIC of the host */
  STEPSCOPE_CLOCK_REALTIME = 2,
  STEPSCOPE_CLOCK_CUPTI = 3 /* cuptiGetTimestamp() */
} stepscope_clock_domain;

/* Collective flags. */
#define STEPSCOPE_COLL_F_P2P       0x1u /* point-to-point (send/recv) */
#define STEPSCOPE_COLL_F_GPU_TIMED 0x2u /* start/end are GPU-side times */
#define STEPSCOPE_COLL_F_PIPELINE  0x4u /* pipeline-parallel activation/gradient transfer */
/* imported without collective metadata: communicator = the NCCL stream, seq = the order on it */
#define STEPSCOPE_COLL_F_INFERRED 0x8u

typedef struct stepscope_kernel {
  uint64_t start_ns, end_ns;
  uint64_t correlation_id; /* joins the launching API record */
  uint64_t stream;         /* stream id (see STREAM records) */
  uint64_t graph_id;       /* CUDA graph id, 0 if none */
  uint32_t name;           /* string id of the (mangled or demangled) name */
  uint32_t device;
  uint32_t grid[3], block[3];
  uint32_t registers_per_thread;
  uint32_t static_shared_bytes, dynamic_shared_bytes;
} stepscope_kernel;

typedef struct stepscope_memcpy {
  uint64_t start_ns, end_ns;
  uint64_t correlation_id;
  uint64_t stream;
  uint64_t bytes;
  uint32_t device;
  uint32_t copy_kind; /* stepscope_memcpy_kind */
  uint32_t src_device, dst_device;
} stepscope_memcpy;

typedef struct stepscope_memset {
  uint64_t start_ns, end_ns;
  uint64_t correlation_id;
  uint64_t stream;
  uint64_t bytes;
  uint32_t device;
  uint32_t value;
} stepscope_memset;

typedef struct stepscope_sync {
  uint64_t start_ns, end_ns;
  uint64_t correlation_id;
  uint64_t stream;   /* the waiting stream (or 0 for the host) */
  uint64_t event_id; /* the event waited on, 0 if none */
  uint32_t device;
  uint32_t sync_kind; /* stepscope_sync_kind */
} stepscope_sync;

typedef struct stepscope_api {
  uint64_t start_ns, end_ns;
  uint64_t correlation_id;
  uint64_t thread;      /* OS thread id */
  uint32_t name;        /* string id: "cudaLaunchKernel", "enqueue matmul"... */
  uint32_t api_kind;    /* stepscope_api_kind */
  uint32_t callback_id; /* CUPTI cbid, 0 if none */
  int32_t return_code;
} stepscope_api;

typedef struct stepscope_range {
  uint64_t start_ns, end_ns;
  uint64_t thread;
  uint64_t payload;      /* interpreted by payload_kind */
  uint32_t name, domain; /* string ids */
  uint32_t category;     /* NVTX category (user-defined number) */
  uint32_t color;        /* ARGB, 0 if none */
  uint32_t payload_kind; /* stepscope_payload_kind */
  uint32_t args;         /* string id of a JSON object, 0 if none */
} stepscope_range;

typedef struct stepscope_mark {
  uint64_t time_ns;
  uint64_t thread;
  uint64_t payload;
  uint32_t name, domain, category, color, payload_kind, args;
} stepscope_mark;

typedef struct stepscope_collective {
  uint64_t start_ns, end_ns;
  uint64_t comm_id; /* communicator id (hash), equal on every member rank */
  uint64_t seq;     /* per-communicator sequence number, from 0 */
  uint64_t count;   /* elements */
  uint64_t bytes;   /* payload bytes as in the busbw formulas */
  uint64_t stream;
  uint64_t correlation_id; /* joins kernel/launch records, 0 if none */
  uint32_t op;             /* stepscope_collective_op */
  uint32_t datatype;       /* stepscope_datatype */
  int32_t peer;            /* root for rooted ops, peer for p2p, -1 otherwise */
  uint32_t comm_rank, comm_size;
  uint32_t algorithm, protocol; /* string ids ("ring", "Simple"...), 0 if unknown */
  uint32_t channels;
  uint32_t device;
  uint32_t flags; /* STEPSCOPE_COLL_F_* */
  uint32_t name;  /* string id of the communicator's name ("dp", "tp"...), 0 if none */
} stepscope_collective;

typedef struct stepscope_host_op {
  uint64_t start_ns, end_ns;
  uint64_t stream;         /* the CPU stream that executed it */
  uint64_t correlation_id; /* joins the HOST_ENQUEUE api record */
  uint64_t bytes;
  uint64_t flops;
  uint64_t comm_id, seq; /* the collective it executed, when category is COMM */
  uint32_t name;         /* string id */
  uint32_t category;     /* stepscope_category */
  uint32_t args;         /* string id of a JSON object, 0 if none */
} stepscope_host_op;

typedef struct stepscope_counter {
  uint64_t time_ns;
  uint32_t name; /* string id */
  uint32_t device;
  double value;
} stepscope_counter;

typedef struct stepscope_memory {
  uint64_t time_ns;
  uint64_t address;
  uint64_t bytes;
  uint64_t in_use_bytes; /* total in use after this event, 0 if unknown */
  uint32_t device;
  uint32_t memory_kind; /* stepscope_memory_kind */
} stepscope_memory;

typedef struct stepscope_dropped {
  uint64_t time_ns;
  uint64_t count;
  uint32_t source; /* stepscope_drop_source */
} stepscope_dropped;

typedef struct stepscope_clock_anchor {
  uint64_t trace_ns;       /* the trace clock ... */
  uint64_t realtime_ns;    /* ... CLOCK_REALTIME ... */
  uint64_t monotonic_ns;   /* ... and CLOCK_MONOTONIC read at (nearly) the same instant */
  uint64_t uncertainty_ns; /* half the time the three reads took */
} stepscope_clock_anchor;

typedef struct stepscope_overhead {
  uint64_t start_ns, end_ns;
  uint64_t thread;
  uint32_t name; /* string id ("cupti buffer flush"...) */
} stepscope_overhead;

typedef struct stepscope_external_correlation {
  uint64_t correlation_id; /* the CUDA API call's correlation id */
  uint64_t external_id;    /* e.g. a PyTorch operator's id */
  uint32_t external_kind;  /* CUpti_ExternalCorrelationKind */
} stepscope_external_correlation;

/* Written by the writer alone, as the last record of a closed file: a file
 * of format 1.1 or later that ends without one was not closed (its process
 * crashed or was killed). stepscope_write refuses this kind. */
typedef struct stepscope_end {
  uint32_t reason; /* stepscope_end_reason */
  uint32_t signal; /* the signal, for STEPSCOPE_END_SIGNAL; else 0 */
} stepscope_end;

typedef struct stepscope_stream {
  uint64_t stream; /* id used by records */
  uint32_t device;
  uint32_t stream_kind; /* stepscope_stream_kind */
  uint32_t name;        /* string id ("compute", "comm dp"...) */
  int32_t priority;
} stepscope_stream;

typedef struct stepscope_string {
  uint32_t id;
  uint32_t length;
  const char *data; /* not NUL-terminated on the wire; readers give a NUL-terminated copy */
} stepscope_string;

typedef struct stepscope_metadata {
  const char *key;        /* NUL-terminated */
  const char *value_json; /* NUL-terminated JSON text */
} stepscope_metadata;

/* One record. `kind` selects the member; readers set every field of that
 * member (0 for fields a file does not carry) and nothing else. */
typedef struct stepscope_record {
  uint32_t kind; /* stepscope_record_kind */
  union {
    stepscope_kernel kernel;
    stepscope_memcpy memcpy;
    stepscope_memset memset;
    stepscope_sync sync;
    stepscope_api api;
    stepscope_range range;
    stepscope_mark mark;
    stepscope_collective collective;
    stepscope_host_op host_op;
    stepscope_counter counter;
    stepscope_memory memory;
    stepscope_dropped dropped;
    stepscope_clock_anchor clock_anchor;
    stepscope_overhead overhead;
    stepscope_external_correlation external_correlation;
    stepscope_end end;
    stepscope_stream stream;
    stepscope_string string;
    stepscope_metadata metadata;
  } u;
} stepscope_record;

/* The file header. Strings may be NULL (written as empty). */
typedef struct stepscope_header {
  uint32_t format_major, format_minor; /* filled by writer/reader */
  int32_t rank, world_size, local_rank;
  int64_t pid;
  uint32_t clock_domain; /* stepscope_clock_domain */
  uint64_t start_ns;     /* trace clock at start */
  const char *hostname;
  const char *producer;    /* "stepscope-train 0.1.0", "stepscope record" ... */
  const char *device_name; /* "NVIDIA H100 80GB HBM3", "cpu" */
  const char *device_json; /* device properties as a JSON object */
  const char *driver_version, *cuda_version, *nccl_version, *cupti_version;
  const char *config_json; /* the run configuration as a JSON object */
} stepscope_header;

/* A record kind's wire name ("kernel", "collective"...), or NULL. */
STEPSCOPE_EXPORT const char *stepscope_record_kind_name(uint32_t kind);
STEPSCOPE_EXPORT const char *stepscope_category_name(uint32_t category);
STEPSCOPE_EXPORT const char *stepscope_collective_op_name(uint32_t op);
STEPSCOPE_EXPORT const char *stepscope_datatype_name(uint32_t datatype);
STEPSCOPE_EXPORT size_t
stepscope_datatype_size(uint32_t datatype); /* bytes per element, 0 if unknown */

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct stepscope_writer stepscope_writer;

typedef struct stepscope_writer_options {
  size_t frame_bytes;         /* close a frame at this much raw data; 0 = 4 MiB */
  unsigned flush_interval_ms; /* close a frame at least this often; 0 = 200 */
  int compression_level;      /* zstd level; 0 = -5 (zstd's fast mode: ~5.5 bytes per kernel
                                 record; 1 gives ~4.6 for ~1.7x the compression time) */
  int background_flush;       /* 1: a thread compresses and closes frames (on size and time);
                                 0: the appending thread does it, on size and flush only */
} stepscope_writer_options;

/* Creates (truncates) `path` and writes the header frame. `opt` may be NULL. */
STEPSCOPE_EXPORT stepscope_writer *stepscope_writer_open(const char *path,
                                                         const stepscope_header *header,
                                                         const stepscope_writer_options *opt,
                                                         stepscope_error *err);

/* Interns a NUL-terminated string; returns its id (>= 1), or 0 on failure or
 * for NULL. Thread-safe; takes a mutex, so hot paths should intern once and
 * keep the id. Equal strings get equal ids within one writer. */
STEPSCOPE_EXPORT uint32_t stepscope_intern(stepscope_writer *w, const char *s);
STEPSCOPE_EXPORT uint32_t stepscope_intern_n(stepscope_writer *w, const char *s, size_t len);

/* Appends a record. Thread-safe and lock-free against other appending
 * threads (each thread fills its own buffer). STRING and HEADER records
 * cannot be appended (use stepscope_intern and the header). Returns 0, or a
 * negative status; a failed append is counted as dropped. */
STEPSCOPE_EXPORT int stepscope_write(stepscope_writer *w, const stepscope_record *rec);

/* Closes a frame now with everything appended so far: all the calling
 * thread's records, and those of threads that are not appending at that
 * moment. A thread caught handing a full buffer to the frame queue keeps
 * its newest records for the next frame, so that each thread's records
 * reach the file in the order it appended them. */
STEPSCOPE_EXPORT int stepscope_writer_flush(stepscope_writer *w, stepscope_error *err);

/* Flushes, writes the final frame and closes the file. Other threads must
 * have stopped appending, since `w` is freed (even on error); the
 * process-wide stepscope_stop has no such rule. */
STEPSCOPE_EXPORT int stepscope_writer_close(stepscope_writer *w, stepscope_error *err);

/* Records the writer could not keep (allocation or I/O failure). */
STEPSCOPE_EXPORT uint64_t stepscope_writer_dropped(const stepscope_writer *w);

/* Bytes written to the file so far (compressed) and records appended. */
STEPSCOPE_EXPORT uint64_t stepscope_writer_bytes_written(const stepscope_writer *w);
STEPSCOPE_EXPORT uint64_t stepscope_writer_records(const stepscope_writer *w);

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct stepscope_reader stepscope_reader;

/* Decompression limits (decompression bombs). A compressed input (a trace's zstd frames;
 * in the analyzer also a gzip Kineto trace or export) may inflate to at most
 *     min(max_bytes, max(ratio x its compressed size, STEPSCOPE_INFLATE_FLOOR))
 * bytes in all; past that, reading stops with STEPSCOPE_E_LIMIT and a message naming the
 * file, the limit and how to raise it. The defaults lie far above real traces (measured:
 * traces of this writer inflate 1.8-2.8 times, bench_writer's synthetic GPU mix 3.4,
 * PyTorch profiler .json.gz traces 6.7-29 times, `stepscope export` .json.gz files 8-13
 * times) and far below bombs (zstd frames of zeros inflate thousands of times, gzip up to
 * 1032 times), so a bomb costs at most what a real trace about 3 times its size costs.
 * The floor lets any input inflate to 64 MiB, as much as one frame of this format may
 * hold, at any ratio (inflating 64 MiB takes a fraction of a second): a small file of
 * synthetic, perfectly regular records (tests/format/test_crash.c writes one kernel at
 * constant time steps, which inflates 2000-5000 times) is still read; a larger one needs
 * the limits raised. The `stepscope` command (and the Python binding)
 * take STEPSCOPE_INFLATE_RATIO=N and STEPSCOPE_INFLATE_MAX=BYTES[K|M|G|T] from the
 * environment (0: no limit); the library never reads the environment. */
#define STEPSCOPE_INFLATE_RATIO_DEFAULT 100u
#define STEPSCOPE_INFLATE_MAX_DEFAULT   ((uint64_t)32 << 30) /* 32 GiB */
#define STEPSCOPE_INFLATE_FLOOR         ((uint64_t)64 << 20) /* 64 MiB: one frame's most */
#define STEPSCOPE_INFLATE_UNLIMITED     UINT64_MAX

typedef struct stepscope_inflate_limits {
  uint64_t ratio;     /* inflated bytes per compressed byte; 0: STEPSCOPE_INFLATE_RATIO_DEFAULT,
                         STEPSCOPE_INFLATE_UNLIMITED: no ratio limit */
  uint64_t max_bytes; /* inflated bytes in all; 0: STEPSCOPE_INFLATE_MAX_DEFAULT,
                         STEPSCOPE_INFLATE_UNLIMITED: no ceiling */
} stepscope_inflate_limits;

/* The most bytes an input of `compressed` bytes may inflate to (limits NULL: the defaults). */
STEPSCOPE_EXPORT uint64_t stepscope_inflate_limit(const stepscope_inflate_limits *limits,
                                                  uint64_t compressed);

/* Fills err (if not NULL) with STEPSCOPE_E_LIMIT and the message for `path`, an input of
 * `compressed` bytes that inflated past stepscope_inflate_limit: which limit, and the
 * variable that raises it. */
STEPSCOPE_EXPORT void stepscope_inflate_limit_error(stepscope_error *err, const char *path,
                                                    const stepscope_inflate_limits *limits,
                                                    uint64_t compressed);

typedef struct stepscope_reader_options {
  stepscope_inflate_limits inflate; /* all zero: the defaults */
} stepscope_reader_options;

/* Opens a trace file and reads its header. NULL on error (err filled). The default
 * options (the decompression limits above). */
STEPSCOPE_EXPORT stepscope_reader *stepscope_reader_open(const char *path, stepscope_error *err);

/* The same with options (NULL: the defaults). */
STEPSCOPE_EXPORT stepscope_reader *stepscope_reader_open_opts(const char *path,
                                                              const stepscope_reader_options *opt,
                                                              stepscope_error *err);

/* The header; valid until close. */
STEPSCOPE_EXPORT const stepscope_header *stepscope_reader_header(const stepscope_reader *r);

/* Reads the next record. Returns 1 with *rec filled, 0 at the end of the
 * file, or a negative status on an error (err names file, offset and what
 * was expected; the records returned before stay valid). STRING and
 * METADATA records are returned too (string/metadata pointers stay valid
 * until close); BLOCK and END records are consumed (see
 * stepscope_reader_close_state). Unknown kinds are skipped and
 * counted. A truncated final frame ends the file with a warning. */
STEPSCOPE_EXPORT int stepscope_reader_next(stepscope_reader *r, stepscope_record *rec,
                                           stepscope_error *err);

/* A string by id: NUL-terminated, or NULL if the id is unknown. */
STEPSCOPE_EXPORT const char *stepscope_reader_string(const stepscope_reader *r, uint32_t id);

/* Warnings collected so far (truncated final frame, ...). */
STEPSCOPE_EXPORT size_t stepscope_reader_warning_count(const stepscope_reader *r);
STEPSCOPE_EXPORT const char *stepscope_reader_warning(const stepscope_reader *r, size_t i);

/* Whether the file was closed by its writer, known once stepscope_reader_next
 * has returned 0 (the end of the file). */
typedef enum stepscope_close_state {
  STEPSCOPE_CLOSE_UNKNOWN = 0, /* not read to its end yet, or a file older than format 1.1
                                  (written before END records existed) */
  STEPSCOPE_CLOSE_CLEAN = 1,   /* ends with an END record (reason STEPSCOPE_END_CLOSED) */
  STEPSCOPE_CLOSE_SIGNAL = 2,  /* ends with an END record written when a terminating signal
                                  stopped the program (flushed: nothing was lost) */
  STEPSCOPE_CLOSE_MISSING = 3  /* format 1.1 or later, read to its end, no END record: the
                                  writer never closed it (crash or kill); records still in its
                                  buffers were lost */
} stepscope_close_state;

/* The close state, and for STEPSCOPE_CLOSE_SIGNAL the signal (else 0) in
 * *signal_out when it is not NULL. */
STEPSCOPE_EXPORT int stepscope_reader_close_state(const stepscope_reader *r, int *signal_out);

/* Records of unknown kinds skipped so far. */
STEPSCOPE_EXPORT uint64_t stepscope_reader_unknown_records(const stepscope_reader *r);

/* Damage skipped so far: regions of the file (damaged frames, or the bad
 * tail of a frame) whose records were lost, and their bytes in the file
 * (estimated for a frame's tail). Reading goes on after each. */
STEPSCOPE_EXPORT uint64_t stepscope_reader_damaged_regions(const stepscope_reader *r);
STEPSCOPE_EXPORT uint64_t stepscope_reader_damaged_bytes(const stepscope_reader *r);

/* Compressed bytes consumed so far (for progress). */
STEPSCOPE_EXPORT uint64_t stepscope_reader_offset(const stepscope_reader *r);
STEPSCOPE_EXPORT uint64_t stepscope_reader_file_size(const stepscope_reader *r);

STEPSCOPE_EXPORT void stepscope_reader_close(stepscope_reader *r);

/* Lists the trace files of a run directory (rank-*.trace.zst), sorted by
 * name, as malloc'd paths "DIR/rank-00000.trace.zst". Returns 0 (possibly
 * with *count 0) or a negative status. Free with stepscope_run_files_free. */
STEPSCOPE_EXPORT int stepscope_run_files(const char *dir, char ***paths, size_t *count,
                                         stepscope_error *err);
STEPSCOPE_EXPORT void stepscope_run_files_free(char **paths, size_t count);

/* Formats `rec` as one JSON object (no newline) into buf, like snprintf:
 * returns the length it needed (>= cap means truncated). String ids are
 * resolved through `r` when it is not NULL ("name":"sgemm"); times are
 * integer nanoseconds with the wire field names of docs/trace-format.md. */
STEPSCOPE_EXPORT size_t stepscope_record_to_json(const stepscope_record *rec,
                                                 const stepscope_reader *r, char *buf, size_t cap);

/* Formats a header as one JSON object, like stepscope_record_to_json. */
STEPSCOPE_EXPORT size_t stepscope_header_to_json(const stepscope_header *h, char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* The process-wide tracer ("linked" mode)                                   */
/* ------------------------------------------------------------------------ */

typedef struct stepscope_start_options {
  const char *run_dir; /* directory; created if missing; file is rank-%05d.trace.zst */
  int rank;            /* -1: from RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK, else 0 */
  int world_size; /* -1: from WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, PMI_SIZE, else 1 */
  int local_rank; /* -1: from LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, else 0 */
  const char *producer;
  const char *device_name; /* NULL: "cpu" */
  const char *device_json;
  const char *driver_version, *cuda_version, *nccl_version, *cupti_version;
  const char *config_json;
  uint32_t clock_domain;                  /* 0: monotonic */
  const stepscope_writer_options *writer; /* NULL: defaults (background flush on) */
} stepscope_start_options;

/* Starts the process-wide trace. Returns 0, or a negative status (with a
 * message in err). Starting twice is an error.
 *
 * Signals. The first start installs handlers for SIGTERM, SIGINT and SIGHUP
 * (not for a signal the program ignores; not at all when the environment
 * sets STEPSCOPE_SIGNALS=0). On such a signal the handler hands the work to
 * a tracer thread (a pipe: async-signal-safe) and waits for it, at most 2 s:
 * when the signal's earlier action was the default (termination), the trace
 * is flushed and closed with an END record naming the signal, then the
 * signal is raised again with its default action, so the process dies as it
 * would have; when the program had its own handler, the trace is flushed
 * (not closed) and that handler is called. A handler the program installs
 * later replaces the tracer's (then nothing is flushed). */
STEPSCOPE_EXPORT int stepscope_start(const stepscope_start_options *opt, stepscope_error *err);

/* Flushes and closes the process-wide trace. Safe to call when not started,
 * and while other threads go on emitting: an emission that is in flight
 * when stop closes the writer is in the file; emissions after that are
 * no-ops (as if no trace ran). The trace may be started again. Each
 * start/stop cycle keeps a few hundred bytes (the stopped writer's shell,
 * which late emitters may still be holding). A producer that must not lose
 * its last records still stops its sources first (the GPU tracer's
 * stepscope_gpu_stop flushes CUPTI before stopping the trace). */
STEPSCOPE_EXPORT int stepscope_stop(void);

/* Whether a process-wide trace is running; the writer (NULL if none). */
STEPSCOPE_EXPORT int stepscope_active(void);
STEPSCOPE_EXPORT stepscope_writer *stepscope_current(void);

/* The file path of the running trace, or NULL. */
STEPSCOPE_EXPORT const char *stepscope_current_path(void);

/* Now in the monotonic trace clock (CLOCK_MONOTONIC, ns). */
STEPSCOPE_EXPORT uint64_t stepscope_now_ns(void);

/* The calling thread's OS id. */
STEPSCOPE_EXPORT uint64_t stepscope_thread_id(void);

/* Writes a clock anchor now (done at start, stop and periodically). */
STEPSCOPE_EXPORT void stepscope_clock_anchor_now(void);

/* Names a lane; returns `stream` for convenience. */
STEPSCOPE_EXPORT uint64_t stepscope_stream_declare(uint64_t stream, stepscope_stream_kind kind,
                                                   uint32_t device, const char *name);

/* Ranges on the calling thread (a per-thread stack, nested), domain
 * "stepscope". `args_json` may be NULL. */
STEPSCOPE_EXPORT void stepscope_range_push(const char *name, const char *args_json);
STEPSCOPE_EXPORT void stepscope_range_pop(void);

/* Steps: a range named "step" whose payload is the step number. The analyzer
 * takes these as its step windows. */
STEPSCOPE_EXPORT void stepscope_step_begin(uint64_t step);
STEPSCOPE_EXPORT void stepscope_step_end(void);

STEPSCOPE_EXPORT void stepscope_mark_now(const char *name, const char *args_json);
STEPSCOPE_EXPORT void stepscope_counter_now(const char *name, uint32_t device, double value);

/* Run metadata: `value_json` must be a JSON value ("{...}", "123", "\"x\""). */
STEPSCOPE_EXPORT void stepscope_metadata_set(const char *key, const char *value_json);

/* Host activity: an operation executed on a named stream (a CPU-backend
 * stream, a worker thread, a user queue), timed between begin and end, with
 * a category, optional JSON arguments, and at end the bytes and FLOPs it
 * moved or computed. Writes one HOST_OP record at end. `stream` is any id
 * the caller names once with stepscope_stream_declare. */
typedef struct stepscope_op {
  uint64_t start_ns;
  uint64_t stream;
  uint64_t correlation_id; /* 0, or the id of its enqueue API record */
  uint32_t name, category, args;
} stepscope_op;

STEPSCOPE_EXPORT stepscope_op stepscope_op_begin(uint64_t stream, stepscope_category category,
                                                 const char *name, const char *args_json);
STEPSCOPE_EXPORT void stepscope_op_end(const stepscope_op *op, uint64_t bytes, uint64_t flops);

/* Appends a record to the process-wide trace (no-op if none). */
STEPSCOPE_EXPORT void stepscope_emit(const stepscope_record *rec);

/* Interns into the process-wide trace (0 if none). */
STEPSCOPE_EXPORT uint32_t stepscope_intern_current(const char *s);

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_H */
