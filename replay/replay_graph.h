/* replay_graph.h - CUDA graphs in replay: rebuilding recorded topologies
 * (replay_graph.c), instantiation and exec updates (replay_graph_exec.c),
 * stream captures replayed "dry" (replay_capture.c). Internal to replay/.
 *
 * Graphs are rebuilt from the topology the recorder writes when a graph
 * becomes fixed (Graph{Instantiate}, Graph{ExecUpdate}): every node with its
 * parameters, conditional nodes with their body graphs, child graphs. A
 * captured graph is re-captured when the capture can reproduce it exactly;
 * a capture that cannot (a conditional node or memory nodes in it, nodes
 * added to it by hand, a capture into an existing graph) is replayed dry:
 * its operations are not executed and the graph is rebuilt at instantiation
 * instead. All of this state lives in rp_graphs (rp_state.gs). */
#ifndef CUCAP_REPLAY_GRAPH_H
#define CUCAP_REPLAY_GRAPH_H

#include "replay_state.h"

/* Graph entry points the shared driver table does not carry, fetched once
 * per run with cuGetProcAddress_v2 (graph work is rare next to launches). */
typedef struct rg_fns {
  PFN_cuGraphCreate_v10000 Create;
  PFN_cuGraphAddKernelNode_v12000 AddKernel;
  PFN_cuGraphAddMemcpyNode_v10000 AddMemcpy;
  PFN_cuGraphAddMemsetNode_v10000 AddMemset;
  PFN_cuGraphAddEmptyNode_v10000 AddEmpty;
  PFN_cuGraphAddChildGraphNode_v10000 AddChild;
  PFN_cuGraphAddEventRecordNode_v11010 AddEventRecord;
  PFN_cuGraphAddEventWaitNode_v11010 AddEventWait;
  PFN_cuGraphAddMemAllocNode_v11040 AddMemAlloc;
  PFN_cuGraphAddMemFreeNode_v11040 AddMemFree;
  PFN_cuGraphAddNode_v12030 AddNode;
  PFN_cuGraphAddDependencies_v12030 AddDepsEdge; /* edges with data (1.6) */
  PFN_cuGraphConditionalHandleCreate_v12030 CondHandleCreate;
  PFN_cuGraphGetNodes_v10000 GetNodes;
  PFN_cuGraphNodeGetType_v10000 NodeGetType;
  PFN_cuGraphExecUpdate_v12000 ExecUpdate;
  PFN_cuGraphExecKernelNodeSetParams_v12000 ExecKernel;
  PFN_cuGraphExecMemcpyNodeSetParams_v10020 ExecMemcpy;
  PFN_cuGraphExecMemsetNodeSetParams_v10020 ExecMemset;
  PFN_cuGraphExecChildGraphNodeSetParams_v11010 ExecChild;
  PFN_cuGraphExecEventRecordNodeSetEvent_v11010 ExecEventRecord;
  PFN_cuGraphExecEventWaitNodeSetEvent_v11010 ExecEventWait;
  PFN_cuGraphNodeSetEnabled_v11060 NodeSetEnabled;
  PFN_cuGraphUpload_v11010 Upload;
  PFN_cuGraphUpload_v11010_ptsz UploadPt;
} rg_fns;

typedef struct rp_hostbuf {    /* a copy node's host source, refilled at launch */
  uint64_t src, size;          /* recorded first byte read, packed size */
  uint64_t dst;                /* recorded device destination (pointer patching) */
  void *buf;                   /* the node's source here (in R->cx.keep) */
  cucap_hash128 last;          /* payload it holds */
  int filled;
} rp_hostbuf;

typedef struct rp_hostdst {    /* a copy node's host destination, written at launch */
  uint64_t dst, size;          /* recorded first byte written, packed size */
  void *buf;                   /* the node's destination here (in R->cx.keep) */
} rp_hostdst;

typedef struct rp_gx {         /* one replayed CUgraphExec */
  uint64_t rec_exec;
  rp_hostbuf *hb;
  size_t nhb;
  rp_hostdst *hd;              /* host destinations of a rebuilt graph */
  size_t nhd;
  CUgraph graph;               /* the live graph it was instantiated from */
  int own_graph;               /* 1: rebuilt here, destroyed with the exec */
  cucap_map nodes;                /* recorded node -> live node of `graph` */
  cucap_map handles;              /* recorded conditional handle -> live one */
} rp_gx;

typedef struct rp_stash {      /* a copy swallowed by a dry capture */
  uint64_t src, size;
  cucap_hash128 data;          /* HtoD: its payload */
  int dtoh;                    /* 1: a copy to the host (no payload) */
  uint64_t dst;                /* DtoH: recorded host destination */
  void *host;                  /* DtoH: the buffer the rebuilt node writes
                                  (given to observers), NULL if none */
} rp_stash;

typedef struct rp_graphs {
  rg_fns f;
  int loaded;                  /* f fetched (1 ok, -1 failed) */
  rp_gx *gx;
  size_t ngx, capgx;
  cucap_map gx_of;                /* recorded exec -> index + 1 in gx */
  cucap_map sig;                  /* recorded graph -> signature of its captured topology */
  cucap_map dry;                  /* recorded stream in a dry capture -> origin stream */
  cucap_map dry_events;           /* recorded event recorded in a dry capture -> origin */
  cucap_map capturing;            /* recorded stream -> live stream: real captures open */
  rp_stash *stash;
  size_t nstash, capstash;
  /* from the scan (kept across passes) */
  cucap_map dry_begin;            /* record index of a BeginCapture to replay dry */
  cucap_map scan_open;            /* recorded stream -> record index of its BeginCapture */
  cucap_map scan_added;           /* recorded graph -> record index of a node added by hand */
  cucap_map scan_rebuild;         /* recording tid -> 1: its last captured topology needs a rebuild */
  cucap_map exec_payloads;        /* recorded exec -> 1: its launches carry host payloads */
  rp_gx *building;             /* the exec whose graph is being rebuilt (host sources) */
} rp_graphs;

rp_graphs *rp_graphs_get(rp_state *R);   /* allocated on first use; NULL on OOM */
const rg_fns *rp_graph_fns(rp_state *R); /* NULL if the driver lacks the basics */

/* ---- replay_graph.c: rebuilding ------------------------------------------ */
/* Rebuilds the graph described by g's recorded topology: cuGraphCreate, then
 * every node with its dependencies mapped to the new nodes, recursively
 * (conditional bodies, child graphs). Kernel arguments come from the
 * recorded block (pointer parameters relocated, conditional handles mapped
 * through `handles`, which receives the handles created). nodes (optional)
 * receives recorded node -> live node for the top-level graph. On success
 * *out is a new live CUgraph that the caller destroys and NULL is returned.
 * Otherwise *out is NULL and the result is the skip reason (a static string)
 * or NULL when a driver call failed (R's error is set). */
const char *rp_graph_rebuild(rp_state *R, const cucap_fb_graph *g, CUgraph *out,
                             cucap_map *nodes, cucap_map *handles);

/* Kernel node parameters from a recorded Launch (arguments copied and
 * patched); free with rg_kparams_free. Returns a skip reason or NULL (then
 * check R->failed). */
typedef struct rg_kparams {
  CUDA_KERNEL_NODE_PARAMS p;
  uint8_t *args;
  void **kp;
  void *extra[5];
  size_t argsize;
} rg_kparams;
const char *rg_kparams_make(rp_state *R, const cucap_fb_launch *l, const cucap_map *handles,
                            rg_kparams *out);
void rg_kparams_free(rg_kparams *k);
/* Memset node parameters of a recorded Memset (address translated). */
void rg_memset_params(rp_state *R, const cucap_fb_memset *m, CUDA_MEMSET_NODE_PARAMS *p);
/* Copy node parameters of a recorded Memcpy (device sides translated, host
 * sides from a stashed payload or a scratch buffer); a skip reason or NULL. */
const char *rg_memcpy_params(rp_state *R, const cucap_fb_memcpy *c, CUDA_MEMCPY3D *p);
/* The buffer the rebuilt graph of recorded exec rec_exec writes for its
 * copy to host memory at recorded address dst (size bytes); NULL if that
 * exec was not rebuilt here or has no such node. */
const void *rp_graph_host_dst(rp_state *R, uint64_t rec_exec, uint64_t dst, uint64_t size);
/* Signature of a recorded topology (types, edges, parameters). */
uint64_t rp_graph_signature(const cucap_fb_graph *g);

/* ---- replay_graph_exec.c: instantiate, launch-side ops, exec updates ----- */
/* Graph records other than Launch/Destroy/ExecDestroy: Instantiate,
 * Upload, ExecUpdate, ExecSetParams and the seq-0 topology of a capture. */
void rp_graph_op(rp_state *R, const cucap_fb_record *rec, const cucap_fb_graph *g);
void rp_graph_exec_destroyed(rp_state *R, uint64_t rec_exec); /* before cuGraphExecDestroy */
/* Before cuGraphLaunch: the host memory the exec's copy nodes read, as it
 * was when the program launched (Graph.payloads), put in their sources. */
void rp_graph_launch_payloads(rp_state *R, const cucap_fb_graph *g);
/* Between passes and at the end: exec bookkeeping and per-pass state freed
 * (the live execs themselves are destroyed by the caller); all = 1 also
 * frees what the scan found. */
void rp_graphs_reset(rp_state *R, int all);

/* ---- replay_capture.c: captures -------------------------------------------- */
/* During the scan: notes what makes a capture impossible to re-capture. */
void rp_capture_scan(rp_state *R, const cucap_fb_record *rec, uint64_t rec_index);
/* Stream BeginCapture: 1 if it is replayed dry (nothing for the caller to
 * do); 0: the caller begins a real capture and calls rp_capture_open. */
int rp_capture_begin_dry(rp_state *R, const cucap_fb_record *rec, const cucap_fb_stream *s);
void rp_capture_open(rp_state *R, uint64_t rec_stream, CUstream live);
/* Stream EndCapture: 1 if it ended a dry capture (the graph is rebuilt at
 * its instantiation); 2 if no capture is open there (skipped, by name);
 * 0: the caller ends the real capture (rp_capture_closed). */
int rp_capture_end_dry(rp_state *R, const cucap_fb_stream *s);
void rp_capture_closed(rp_state *R, uint64_t rec_stream);
/* Before any record: 1 if it is an operation on a stream in a dry capture
 * (swallowed; HtoD payloads are kept for the rebuilt graph's copy nodes, a
 * 1D copy to the host gets the buffer its rebuilt node will write). The
 * observers see a swallowed record as captured (rp_obs_captured_dry, with
 * that buffer as op->host_data), so verify checks it at its CopyResult. */
int rp_capture_swallow(rp_state *R, const cucap_fb_record *rec);
/* 1 while a capture is open: a real one (R->capturing) or one replayed dry. */
int rp_capture_any(const rp_state *R);
/* End of a pass: captures the program left open are ended (their graphs
 * dropped) so that the final synchronisation is legal; returns how many. */
size_t rp_captures_close(rp_state *R);
/* Ends the capture open on live stream s and destroys the graph it built;
 * 1 if cuStreamEndCapture succeeded. */
int rp_capture_end_drop(rp_state *R, CUstream s);
/* Ends the open captures of streams that context ctx owns (it is about to be
 * destroyed: the graph being built would outlive it) and drops their graphs.
 * Returns how many. */
size_t rp_captures_close_ctx(rp_state *R, CUcontext ctx);
/* Payload stashed for a host source at src (size bytes), or NULL. */
const rp_stash *rp_capture_stash_find(rp_state *R, uint64_t src, uint64_t size);
/* The copy to the host from device address src to host address dst of size
 * bytes that a dry capture swallowed (the latest), or NULL. */
const rp_stash *rp_capture_dtoh_find(rp_state *R, uint64_t src, uint64_t dst, uint64_t size);

#endif
