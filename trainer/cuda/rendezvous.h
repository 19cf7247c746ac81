/*
 * rendezvous.h — how rank processes find each other to exchange NCCL unique ids:
 * the launcher environment, and a tiny key-value store (set once, get blocks
 * until set) over a shared directory or over TCP.
 *
 * What it is for: an NCCL communicator starts from a 128-byte unique id created by
 * one member and given to all others. Under the built-in launcher (one machine) the
 * store is a directory next to the job's shared segment; under an outside launcher
 * it is a TCP store served by world rank 0 at MASTER_ADDR:MASTER_PORT (torchrun,
 * or set them for srun/mpirun), or a directory on a shared file system
 * (STEPSCOPE_RDZV=file:///path). No NCCL or CUDA in here, so it is tested on any
 * machine.
 *
 * How it works:
 *   - file store: set(key) writes <dir>/.<key>.tmp.<pid> and renames it to <dir>/<key>
 *     (atomic); get polls for <dir>/<key> until the timeout; close removes the
 *     keys this process set, and the directory once it is empty.
 *   - TCP store: rank 0 runs a server thread holding the keys; a client connects
 *     (retrying until the timeout, since rank 0 may start later), sends
 *     "S <keylen> <vallen>\n<key><value>" or "G <keylen>\n<key>" and reads
 *     "<vallen>\n<value>"; a GET for a missing key is answered when the key is set.
 * Every failure is a message naming the store, the key and the cause.
 */
#ifndef STEPSCOPE_TRAINER_RENDEZVOUS_H
#define STEPSCOPE_TRAINER_RENDEZVOUS_H

#include <stddef.h>

/* Who this process is, from the launcher's environment. */
typedef struct rdzv_env {
  int rank, world, local_rank, local_world;
  int local_world_known; /* the launcher said how many ranks run on this machine */
  char master_addr[256];
  int master_port;
  char source[32]; /* "torchrun", "slurm", "openmpi", "pmi", "none" */
} rdzv_env;

/* Reads RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun), SLURM_PROCID/
 * SLURM_NTASKS/SLURM_LOCALID/SLURM_NTASKS_PER_NODE, OMPI_COMM_WORLD_RANK/SIZE/
 * LOCAL_RANK/LOCAL_SIZE, PMI_RANK/PMI_SIZE, in that order, plus MASTER_ADDR and
 * MASTER_PORT. Returns 0 when a launcher was recognised, -1 otherwise (out->source
 * is then "none" and rank/world are 0/1). Without a local size, local_world is the
 * world: known for torchrun-style variables (torchrun always sets LOCAL_WORLD_SIZE;
 * stepscope-train's own launcher starts every rank on this machine), unknown for the
 * others. */
int rdzv_env_detect(rdzv_env *out);

typedef struct rdzv_store rdzv_store;

/* A file store in `dir` (created if missing). */
rdzv_store *rdzv_file_open(const char *dir, double timeout_s, char *err, size_t errlen);
/* A TCP store: `serve` (world rank 0) listens on addr:port (addr "" = all interfaces)
 * in a background thread; every process, the server included, is a client. */
rdzv_store *rdzv_tcp_open(const char *addr, int port, int serve, double timeout_s, char *err,
                          size_t errlen);
/* From the environment: STEPSCOPE_RDZV=file:///dir or tcp://host:port, else the TCP
 * store at MASTER_ADDR:MASTER_PORT (+1: the port torchrun itself uses stays free). */
rdzv_store *rdzv_open_from_env(const rdzv_env *env, double timeout_s, char *err, size_t errlen);
void rdzv_close(rdzv_store *s);

int rdzv_set(rdzv_store *s, const char *key, const void *value, size_t len, char *err,
             size_t errlen);
/* Waits until key is set; copies at most cap bytes and stores the length in *len. */
int rdzv_get(rdzv_store *s, const char *key, void *value, size_t cap, size_t *len, char *err,
             size_t errlen);

#endif /* STEPSCOPE_TRAINER_RENDEZVOUS_H */
