/* Pipelined binary tree all-reduce (tree) and NCCL's double binary tree (dtree).
 *
 * tree: the vector goes in chunks of c->chunk_bytes up the tree of coll_btree(.., 0) to rank 0,
 * each node reducing its children's chunks into its own before passing the chunk on, and the
 * reduced chunks come back down. dtree: two complementary trees (coll_btree 0 and 1), each
 * carrying half of the vector; a rank is an interior node of at most one of them, so no rank
 * carries more than about 2n bytes each way (a single tree's interior nodes carry 3n).
 *
 * Schedule, in lockstep steps (each rank posts a step's messages in a fixed order and waits for
 * them), with h a node's height, H the root's and d its depth: chunk j goes up from a node at
 * step j + h and leaves the root downwards at step j + H, reaching depth d at step j + H + d - 1.
 * Reduction and broadcast overlap, k chunks take k + 2H - 1 steps, and both ends of every edge
 * know which message each step carries (the transports match in order). The root reduces every
 * chunk once and broadcasts it, so all ranks end bit-identical. */
#include <stdlib.h>

#include "algo_plan.h"

typedef struct {
  int parent, child[2];
  int h, hc[2], H, depth;
  unsigned char *base; /* this tree's part of the vector */
  size_t count, chunk, nchunks;
  unsigned char *slot[2]; /* one chunk per child, reduced after the step */
  long pending[2];        /* chunk received into slot[i] this step, or -1 */
} tree_role;

/* Chunk j of a tree: byte offset and length (elements of es bytes). */
static void tree_chunk(const tree_role *t, long j, size_t es, size_t *off, size_t *bytes) {
  size_t first = (size_t)j * t->chunk;
  size_t n = t->count - first < t->chunk ? t->count - first : t->chunk;
  *off = first * es;
  *bytes = n * es;
}

static int tree_valid(const tree_role *t, long j) { return j >= 0 && (size_t)j < t->nchunks; }

/* Post this tree's messages of step s. Tags carry the step (and tree) so a schedule slip is
 * caught by the transport's tag check rather than corrupting data. */
static int tree_post(coll_comm *c, coll_reqset *rs, tree_role *t, int which, long s, size_t es,
                     coll_err *e) {
  uint32_t tag = coll_tag(c, (uint32_t)(s * 2 + which));
  size_t off, len;
  /* up: children's chunks into the slots, then my chunk to the parent */
  for (int i = 0; i < 2; i++) {
    t->pending[i] = -1;
    long j = s - t->hc[i];
    if (t->child[i] < 0 || !tree_valid(t, j)) continue;
    tree_chunk(t, j, es, &off, &len);
    if (coll_reqset_recv(rs, t->child[i], t->slot[i], len, tag, e) != 0) return -1;
    t->pending[i] = j;
  }
  if (t->parent >= 0 && tree_valid(t, s - t->h)) {
    tree_chunk(t, s - t->h, es, &off, &len);
    if (coll_reqset_send(rs, t->parent, t->base + off, len, tag, e) != 0) return -1;
  }
  /* down: the reduced chunk from the parent, then the one before it to the children */
  if (t->parent >= 0 && tree_valid(t, s - t->H - t->depth + 1)) {
    tree_chunk(t, s - t->H - t->depth + 1, es, &off, &len);
    if (coll_reqset_recv(rs, t->parent, t->base + off, len, tag, e) != 0) return -1;
  }
  long jd = s - t->H - t->depth;
  for (int i = 0; i < 2; i++) {
    if (t->child[i] < 0 || !tree_valid(t, jd)) continue;
    tree_chunk(t, jd, es, &off, &len);
    if (coll_reqset_send(rs, t->child[i], t->base + off, len, tag, e) != 0) return -1;
  }
  return 0;
}

/* Runs ntrees (1 or 2) trees, tree i carrying block i of coll_block(count, ntrees). */
static int tree_run(coll_comm *c, unsigned char *buf, size_t count, coll_dtype dt, coll_op op,
                    int ntrees, coll_err *e) {
  int p = c->size, me = c->rank;
  size_t es = coll_dtype_size(dt);
  size_t chunk = c->chunk_bytes / es ? c->chunk_bytes / es : 1;
  int *shape = malloc(sizeof(int) * (size_t)p * 5);
  if (!shape) return coll_fail(e, "rank %d: out of memory for tree shapes", me);
  int *parent = shape, *child = shape + p, *height = shape + 3 * p, *depth = shape + 4 * p;
  tree_role t[2];
  long steps = 0;
  size_t slot_bytes = chunk * es;
  unsigned char *slots = coll_scratch(c, 0, slot_bytes * 2 * (size_t)ntrees, e);
  if (!slots) {
    free(shape);
    return -1;
  }
  for (int w = 0; w < ntrees; w++) {
    int root = coll_btree(parent, child, p, w);
    coll_btree_levels(height, depth, parent, child, p);
    tree_role *r = &t[w];
    size_t off;
    coll_block(count, ntrees, w, &off, &r->count);
    r->base = buf + off * es;
    r->chunk = chunk;
    r->nchunks = (r->count + chunk - 1) / chunk;
    r->parent = parent[me];
    r->h = height[me];
    r->H = height[root];
    r->depth = depth[me];
    for (int i = 0; i < 2; i++) {
      r->child[i] = child[2 * me + i];
      r->hc[i] = r->child[i] >= 0 ? height[r->child[i]] : 0;
      r->slot[i] = slots + slot_bytes * (size_t)(2 * w + i);
    }
    long last = (long)r->nchunks + 2L * r->H - 1;
    if (r->nchunks > 0 && last > steps) steps = last;
  }
  free(shape);

  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 6 * ntrees, e) != 0) return -1;
  for (long s = 0; s < steps; s++) {
    for (int w = 0; w < ntrees; w++)
      if (tree_post(c, &rs, &t[w], w, s, es, e) != 0) return -1;
    if (coll_reqset_wait(&rs, e) != 0) return -1;
    /* Children in a fixed order, so the reduction order is the same every call. */
    for (int w = 0; w < ntrees; w++) {
      for (int i = 0; i < 2; i++) {
        if (t[w].pending[i] < 0) continue;
        size_t off, len;
        tree_chunk(&t[w], t[w].pending[i], es, &off, &len);
        coll_creduce(c, t[w].base + off, t[w].slot[i], len / es, dt, op);
      }
    }
  }
  return 0;
}

int coll_ar_tree(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                 coll_err *e) {
  (void)param;
  if (c->size < 2 || count == 0) return 0;
  return tree_run(c, buf, count, dt, op, 1, e);
}

int coll_ar_dtree(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                  coll_err *e) {
  (void)param;
  if (c->size < 2 || count == 0) return 0;
  return tree_run(c, buf, count, dt, op, count > 1 ? 2 : 1, e);
}
