/* replay_graph.h - rebuilding graphs made with the explicit graph API. Internal to replay/. */
#ifndef CUCAP_REPLAY_GRAPH_H
#define CUCAP_REPLAY_GRAPH_H

#include "replay_state.h"

/* Rebuilds the graph described by g's recorded topology (a Graph{Instantiate}
 * record whose graph no replayed capture produced): cuGraphCreate, then every
 * node with its dependencies mapped to the new nodes, kernel arguments taken
 * from the recorded block (pointer parameters relocated like launches).
 * On success *out is a new live CUgraph that the caller destroys (after
 * instantiating it) and NULL is returned. Otherwise *out is NULL and the
 * result is the skip reason (a static string) or NULL when a driver call
 * failed (R's error is set). */
const char *rp_graph_rebuild(rp_state *R, const cucap_fb_graph *g, CUgraph *out);

#endif
