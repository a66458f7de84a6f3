/* The tcp transport's receive path: frame headers (magic, tag, length, sequence, check) and
 * payloads read from a real socket, cut wherever the input says. Input: a count k (1 + byte % 4)
 * of receives, each a tag byte and a 2-byte little-endian size (at most 4096), then the bytes
 * rank 1 "sent". The wire is written into one end of a socketpair and closed; rank 0's
 * transport receives on the other end.
 * Oracle: the receives succeed exactly when the wire is k well-formed frames in order, and
 * then each buffer holds its frame's payload. */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coll_internal.h"
#include "fuzz.h"

#define MAGIC 0x46425450u

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* An independent reading of the frame format (24 bytes, little-endian on this host):
 * magic, tag, len (64 bits), seq, check = xor of the 32-bit words ^ 0x9e3779b9. */
static int frame_ok(const uint8_t *h, uint32_t seq, uint32_t tag, size_t len) {
  uint32_t w[6];
  for (int i = 0; i < 6; i++) w[i] = rd32(h + 4 * i);
  uint64_t l = (uint64_t)w[2] | (uint64_t)w[3] << 32;
  uint32_t check = w[0] ^ w[1] ^ w[2] ^ w[3] ^ w[4] ^ 0x9e3779b9u;
  return w[0] == MAGIC && w[1] == tag && l == len && w[4] == seq && w[5] == check;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int k = 1 + data[0] % 4;
  data++;
  size--;
  if (size < (size_t)k * 3) return 0;
  uint32_t tags[4];
  size_t lens[4];
  for (int i = 0; i < k; i++) {
    tags[i] = data[0];
    lens[i] = ((size_t)data[1] | (size_t)data[2] << 8) % 4097;
    data += 3;
    size -= 3;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
  /* the whole wire fits in the socket buffer, so one write and no reader thread */
  size_t w = 0;
  while (w < size) {
    ssize_t r = write(sv[1], data + w, size - w);
    if (r <= 0) break;
    w += (size_t)r;
  }
  shutdown(sv[1], SHUT_WR);

  char hosts[2][COLL_HOST_MAX] = {"host0", "host1"};
  coll_comm cm;
  memset(&cm, 0, sizeof cm);
  cm.rank = 0;
  cm.size = cm.world_size = 2;
  cm.hosts = hosts;
  int fds[2] = {-1, sv[0]};
  coll_transport *t;
  coll_err e;
  if (coll_tcp_from_fds(&t, &cm, 1, fds, &e) != 0) {
    close(sv[0]);
    close(sv[1]);
    return 0;
  }
  coll_req reqs[4];
  uint8_t *bufs[4];
  int rc = 0;
  for (int i = 0; i < k; i++) {
    bufs[i] = malloc(lens[i] ? lens[i] : 1);
    memset(bufs[i], 0xa5, lens[i]);
    if (rc == 0) rc = t->ops->irecv(t, 1, bufs[i], lens[i], tags[i], &reqs[i], &e);
  }
  if (rc == 0) rc = t->ops->waitall(t, reqs, k, 2000, &e);

  /* the reference: k frames, numbered from 0, then nothing more is needed */
  int ok = 1;
  size_t off = 0;
  for (int i = 0; i < k && ok; i++) {
    ok = off + 24 + lens[i] <= size && frame_ok(data + off, (uint32_t)i, tags[i], lens[i]);
    if (ok) off += 24 + lens[i];
  }
  FUZZ_SAY(rc, e.msg);
  if (rc == 0) {
    FUZZ_CHECK(ok);
    off = 0;
    for (int i = 0; i < k; i++) {
      FUZZ_CHECK(memcmp(bufs[i], data + off + 24, lens[i]) == 0);
      off += 24 + lens[i];
    }
  } else {
    FUZZ_CHECK(!ok);
    FUZZ_CHECK(strstr(e.msg, "rank 0 (host0)") != NULL && strstr(e.msg, "rank 1 (host1)") != NULL);
  }
  t->ops->close(t);
  for (int i = 0; i < k; i++) free(bufs[i]);
  close(sv[1]);
  return 0;
}
