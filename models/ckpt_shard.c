/* Checkpoints, the sharded form (nn_data.h): each rank's file of its ranges, and rank 0's
 * manifest naming the set. A shard: the shared header (extra: its range count), the ranges as
 * (offset, count) u64 pairs, the parameters then the momentum at those ranges and the buffers as
 * float32, and a crc32 of everything before it. The manifest: the header (rank 0, the set's rank
 * count) and per rank its file's length (u64) and crc32, then a crc32 of all. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ckpt_int.h"
#include "util.h"

#define MAX_COUNT (1ull << 40) /* floats of an arena: a larger count is a damaged header */

void nn_ckpt_shard_path(char *out, size_t cap, const char *manifest, int64_t gstep, int rank, int world) {
  snprintf(out, cap, "%s.step%lld.rank%dof%d", manifest, (long long)gstep, rank, world);
}

static uint64_t ranges_floats(const size_t *cnt, int nr) {
  uint64_t sum = 0;
  for (int i = 0; i < nr; i++) sum += cnt[i];
  return sum;
}

static int replace(const char *path, ckpt_wbuf *b, nn_ckpt_shard_ref *ref, char *err, size_t errcap) {
  uint32_t crc = (uint32_t)crc32_z(0L, b->p, b->off);
  ckpt_put_u32(b, crc);
  char e[4400];
  int rc = util_file_replace(path, b->p, b->off, e, sizeof e);
  if (rc) snprintf(err, errcap, "checkpoint: %s", e);
  else if (ref) ref->bytes = b->off, ref->crc = crc; /* not the crc over crc included: that is a constant */
  free(b->p);
  return rc;
}

int nn_ckpt_shard_save(const char *path, const nn_ckpt_info *info, const size_t *off, const size_t *cnt, int nr,
                       const float *params, const float *momentum, const float *buffers, nn_ckpt_shard_ref *ref,
                       char *err, size_t errcap) {
  uint64_t sum = ranges_floats(cnt, nr);
  if (info->n_momentum != info->n_params || nr < 0) {
    snprintf(err, errcap, "checkpoint shard %s: the momentum must be sharded as the parameters", path);
    return -1;
  }
  size_t total = CKPT_HDR_BYTES + 16 * (size_t)nr + 4 * (2 * (size_t)sum + info->n_buffers) + 4;
  ckpt_wbuf b = {malloc(total), 0, total};
  if (!b.p) {
    snprintf(err, errcap, "checkpoint shard %s: out of memory", path);
    return -1;
  }
  ckpt_encode_header(&b, ckpt_magic_shard, info, (uint32_t)nr);
  for (int i = 0; i < nr; i++) ckpt_put_u64(&b, off[i]), ckpt_put_u64(&b, cnt[i]);
  for (int i = 0; i < nr; i++) ckpt_put_floats(&b, params + off[i], cnt[i]);
  for (int i = 0; i < nr; i++) ckpt_put_floats(&b, momentum + off[i], cnt[i]);
  ckpt_put_floats(&b, buffers, info->n_buffers);
  return replace(path, &b, ref, err, errcap);
}

int nn_ckpt_manifest_save(const char *path, const nn_ckpt_info *info, const nn_ckpt_shard_ref *refs, char *err,
                          size_t errcap) {
  if (info->world < 1 || info->world > NN_CKPT_MAX_RANKS) {
    snprintf(err, errcap, "checkpoint %s: %d ranks", path, info->world);
    return -1;
  }
  size_t total = CKPT_HDR_BYTES + 12 * (size_t)info->world + 4;
  ckpt_wbuf b = {malloc(total), 0, total};
  if (!b.p) {
    snprintf(err, errcap, "checkpoint %s: out of memory", path);
    return -1;
  }
  nn_ckpt_info in = *info;
  in.rank = 0;
  ckpt_encode_header(&b, ckpt_magic_manifest, &in, 0);
  for (int r = 0; r < info->world; r++) ckpt_put_u64(&b, refs[r].bytes), ckpt_put_u32(&b, refs[r].crc);
  return replace(path, &b, NULL, err, errcap);
}

int ckpt_manifest_parse(const uint8_t *p, size_t n, nn_ckpt_info *info, nn_ckpt_shard_ref *refs, char *why,
                        size_t cap) {
  if (ckpt_frame(ckpt_magic_manifest, p, n, info, NULL, why, cap)) return -1;
  if (info->world < 1 || info->world > NN_CKPT_MAX_RANKS || (info->sharded != 2 && info->sharded != 3)) {
    snprintf(why, cap, "damaged manifest (%d ranks, stage %d)", info->world, info->sharded);
    return -1;
  }
  size_t want = CKPT_HDR_BYTES + 12 * (size_t)info->world + 4;
  if (n != want) {
    snprintf(why, cap, "%s manifest (%zu bytes, its header says %zu)", n < want ? "truncated" : "wrong length", n,
             want);
    return -1;
  }
  if (!ckpt_crc_ok(p, n)) {
    snprintf(why, cap, "corrupted manifest (checksum mismatch)");
    return -1;
  }
  size_t off = CKPT_HDR_BYTES;
  for (int r = 0; refs && r < info->world; r++) {
    refs[r].bytes = ckpt_get_u64(p, &off);
    refs[r].crc = ckpt_get_u32(p, &off);
  }
  return 0;
}

/* The manifest at path, with want's rank's reference. */
static int read_manifest(const char *path, const nn_ckpt_info *want, nn_ckpt_info *man, nn_ckpt_shard_ref *ref,
                         char *err, size_t errcap) {
  uint8_t *p;
  size_t n;
  char e[4400], why[256];
  if (ckpt_read_file(path, &p, &n, e, sizeof e)) {
    snprintf(err, errcap, "checkpoint %s", e);
    return -1;
  }
  nn_ckpt_shard_ref *refs = NULL;
  int rc = ckpt_frame(ckpt_magic_manifest, p, n, man, NULL, why, sizeof why);
  if (!rc && man->world >= 1 && man->world <= NN_CKPT_MAX_RANKS &&
      !(refs = calloc((size_t)man->world, sizeof *refs))) {
    snprintf(why, sizeof why, "out of memory");
    rc = -1;
  }
  if (!rc) rc = ckpt_manifest_parse(p, n, man, refs, why, sizeof why);
  free(p);
  /* the set against this run: its stage and its rank count */
  if (!rc && man->sharded != want->sharded) {
    snprintf(why, sizeof why, "a sharded checkpoint of --dp %s; this run is --dp %s",
             man->sharded == 3 ? "sharded3" : "sharded", want->sharded == 3 ? "sharded3" : "sharded");
    rc = -1;
  }
  if (!rc && (want->rank < 0 || want->rank >= want->world)) {
    snprintf(why, sizeof why, "rank %d of %d", want->rank, want->world);
    rc = -1;
  }
  if (!rc && man->world != want->world) {
    snprintf(why, sizeof why, "a sharded checkpoint of %d ranks; this run has %d (each rank resumes its own shard)",
             man->world, want->world);
    rc = -1;
  }
  if (!rc) {
    nn_ckpt_info w0 = *want;
    w0.rank = 0;
    rc = nn_ckpt_check(man, &w0, why, sizeof why);
  }
  if (!rc) *ref = refs[want->rank];
  if (rc) snprintf(err, errcap, "checkpoint %s: %s", path, why);
  free(refs);
  return rc;
}

/* Checks the shard's bytes against its own header, the manifest and the run; 0, or -1 with why. */
static int shard_check(const uint8_t *p, size_t n, nn_ckpt_info *have, const nn_ckpt_info *man,
                       const nn_ckpt_shard_ref *ref, const nn_ckpt_info *want, const size_t *off, const size_t *cnt,
                       int nr, char *why, size_t cap) {
  uint32_t hnr = 0;
  if (ckpt_frame(ckpt_magic_shard, p, n, have, &hnr, why, cap)) return -1;
  if (have->n_params > MAX_COUNT || have->n_buffers > MAX_COUNT) {
    snprintf(why, cap, "corrupted (counts no arena has)");
    return -1;
  }
  if (n < CKPT_HDR_BYTES + 16 * (size_t)hnr + 4) {
    snprintf(why, cap, "truncated (%zu bytes, shorter than its %u ranges)", n, hnr);
    return -1;
  }
  uint64_t sum = 0;
  size_t o = CKPT_HDR_BYTES;
  for (uint32_t i = 0; i < hnr; i++) {
    uint64_t ro = ckpt_get_u64(p, &o), rc = ckpt_get_u64(p, &o);
    if (ro > have->n_params || rc > have->n_params - ro || rc > have->n_params - sum) {
      snprintf(why, cap, "corrupted (a range outside the arena, or more ranges than it holds)");
      return -1;
    }
    sum += rc;
  }
  uint64_t len = CKPT_HDR_BYTES + 16 * (uint64_t)hnr + 4 * (2 * sum + have->n_buffers) + 4;
  if (n != len) {
    snprintf(why, cap, "%s (%zu bytes, its header says %" PRIu64 ")", n < len ? "truncated" : "wrong length", n, len);
    return -1;
  }
  if (!ckpt_crc_ok(p, n)) {
    snprintf(why, cap, "corrupted (checksum mismatch)");
    return -1;
  }
  size_t tail = n - 4;
  if (have->set_id != man->set_id || n != ref->bytes || ckpt_get_u32(p, &tail) != ref->crc) {
    snprintf(why, cap, "not the file its manifest names (another save's: a save cut short, or files mixed)");
    return -1;
  }
  if (have->rank != want->rank || have->world != want->world || have->sharded != want->sharded) {
    snprintf(why, cap, "the shard of rank %d of %d (stage %d); this is rank %d of %d (stage %d)", have->rank,
             have->world, have->sharded, want->rank, want->world, want->sharded);
    return -1;
  }
  if (nn_ckpt_check(have, want, why, cap)) return -1;
  int same = hnr == (uint32_t)nr;
  o = CKPT_HDR_BYTES;
  for (int i = 0; same && i < nr; i++) same = ckpt_get_u64(p, &o) == off[i] && ckpt_get_u64(p, &o) == cnt[i];
  if (!same) {
    snprintf(why, cap, "its ranges of the arena differ from this run's (other --bucket-mb or --first-bucket-mb?)");
    return -1;
  }
  return 0;
}

int nn_ckpt_shard_load(const char *path, const nn_ckpt_info *want, const size_t *off, const size_t *cnt, int nr,
                       float *params, float *momentum, float *buffers, char *err, size_t errcap) {
  nn_ckpt_info man, have;
  nn_ckpt_shard_ref ref;
  if (read_manifest(path, want, &man, &ref, err, errcap)) return -1;
  char sp[4400], e[4400], why[256];
  nn_ckpt_shard_path(sp, sizeof sp, path, man.global_step, want->rank, want->world);
  uint8_t *p;
  size_t n;
  if (ckpt_read_file(sp, &p, &n, e, sizeof e)) {
    snprintf(err, errcap, "checkpoint shard %s", e);
    return -1;
  }
  if (shard_check(p, n, &have, &man, &ref, want, off, cnt, nr, why, sizeof why)) {
    snprintf(err, errcap, "checkpoint shard %s: %s", sp, why);
    free(p);
    return -1;
  }
  size_t o = CKPT_HDR_BYTES + 16 * (size_t)nr;
  for (int i = 0; i < nr; i++) ckpt_get_floats(params + off[i], p, &o, cnt[i]);
  for (int i = 0; i < nr; i++) ckpt_get_floats(momentum + off[i], p, &o, cnt[i]);
  ckpt_get_floats(buffers, p, &o, have.n_buffers);
  free(p);
  return 0;
}
