/* Recursive doubling all-reduce: lg p exchanges of the whole vector with partner newrank ^ mask,
 * after the MPICH fold for rank counts that are not a power of two (algo_plan.h). Latency-optimal
 * (lg p messages) but every step moves and reduces all n bytes, so it is for small messages.
 *
 * Each exchange goes in pieces reduced as they arrive (coll_xchg_reduce), so the reduction hides
 * under the transfer instead of following it.
 *
 * Both partners of a step compute the same value: each reduces (lower newrank's vector) op
 * (higher newrank's vector), in that order, so every rank evaluates one expression tree and the
 * results are bit-identical also where an op is not commutative bit for bit (signed zeros in
 * min/max, NaN payloads). */
#include <string.h>

#include "algo_plan.h"

int coll_ar_rd(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
               coll_err *e) {
  (void)param;
  if (c->size < 2 || count == 0) return 0;
  size_t bytes = count * coll_dtype_size(dt);
  coll_fold f;
  coll_fold_plan(&f, c->size, c->rank);
  uint32_t step = 0;

  /* Fold: evens of the first 2*rem ranks give their vector to the odd neighbour. */
  if (coll_fold_in(c, &f, buf, count, dt, op, step, e) != 0) return -1;
  step++;

  /* each exchange sends the vector it reduces into, piece by piece (coll_xchg_reduce); where
   * the partner is the lower, received op mine */
  if (f.newrank >= 0)
    for (int mask = 1; mask < f.pof2; mask <<= 1, step++)
      if (coll_xchg_reduce(c, coll_fold_real(&f, f.newrank ^ mask), buf, count, buf, count, dt, op,
                           (f.newrank & mask) != 0, coll_tag(c, step), e) != 0)
        return -1;

  /* Unfold: the odds hand the result back. */
  coll_reqset rs;
  if (coll_reqset_init(&rs, c, 2, e) != 0) return -1;
  return coll_fold_out(c, &f, &rs, buf, bytes, e);
}
