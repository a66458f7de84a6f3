/* The bootstrap's messages, read from a real socket (a socketpair whose other end holds the
 * input and is then closed). Input: a mode byte, a size byte, then what the peer sent:
 *   mode 0: rank 0 reads a joining rank's hello (admit);
 *   mode 1: a joining rank reads rank 0's reply and host table (join);
 *   mode 2: a rank reads rank 0's all-gather answer;
 *   mode 3: rank 0 reads every peer's all-gather message (the input split between them).
 * Oracle: no crash, no read past a buffer, and what is accepted is consistent. */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coll_internal.h"
#include "fuzz.h"
#include "sock.h"

#define TOKEN "fuzz-token"

static int feed(int sv[2], const uint8_t *data, size_t size) {
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
  size_t w = 0;
  while (w < size) {
    ssize_t r = write(sv[1], data + w, size - w);
    if (r <= 0) break;
    w += (size_t)r;
  }
  shutdown(sv[1], SHUT_WR);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > 16384) return 0;
  int mode = data[0] % 4, n = 2 + data[1] % 7;
  data += 2;
  size -= 2;
  coll_boot *b;
  coll_err e;
  double deadline = coll_sock_now() + 2.0;
  int sv[2];
  if (mode == 0) {
    if (coll_boot_from_fds(&b, 0, n, NULL, 2000, &e) != 0) return 0;
    if (feed(sv, data, size) != 0) {
      coll_boot_close(b);
      return 0;
    }
    int joined = coll_boot_admit(b, sv[0], TOKEN, deadline);
    FUZZ_SAY(!joined, "rejected");
    FUZZ_CHECK(joined == 0 || joined == 1);
    /* accepted: exactly one peer's slot now names a host of the hello's, terminated */
    int renamed = 0;
    for (int r = 1; r < n; r++) {
      char want[16];
      snprintf(want, sizeof want, "host%d", r);
      const char *h = coll_boot_host(b, r);
      FUZZ_CHECK(strnlen(h, COLL_HOST_MAX) < COLL_HOST_MAX);
      renamed += strcmp(h, want) != 0;
    }
    FUZZ_CHECK(renamed <= joined);
    close(sv[1]);
    coll_boot_close(b);
    return 0;
  }
  if (mode == 1) {
    int rank = 1 + (int)(size % (size_t)(n - 1));
    if (coll_boot_from_fds(&b, rank, n, NULL, 2000, &e) != 0) return 0;
    if (feed(sv, data, size) != 0) {
      coll_boot_close(b);
      return 0;
    }
    int rc = coll_boot_join(b, sv[0], TOKEN, deadline, &e);
    FUZZ_SAY(rc, e.msg);
    if (rc == 0)
      for (int r = 0; r < n; r++) FUZZ_CHECK(strnlen(coll_boot_host(b, r), COLL_HOST_MAX) < COLL_HOST_MAX);
    else
      FUZZ_CHECK(strstr(e.msg, "rank ") != NULL);
    close(sv[1]);
    coll_boot_close(b); /* closes sv[0], which join took */
    return 0;
  }
  if (mode == 2) {
    size_t bytes = 1 + size % 64;
    if (feed(sv, data, size) != 0) return 0;
    int fds[9] = {sv[0], -1, -1, -1, -1, -1, -1, -1, -1};
    if (coll_boot_from_fds(&b, 1, n, fds, 2000, &e) != 0) {
      close(sv[0]);
      close(sv[1]);
      return 0;
    }
    uint8_t mine[64], *all = malloc(bytes * (size_t)n);
    memset(mine, 7, sizeof mine);
    int rc = all ? coll_boot_allgather(b, all, mine, bytes, &e) : 0;
    FUZZ_SAY(rc, e.msg);
    if (rc != 0) FUZZ_CHECK(strstr(e.msg, "rank 1 (host1)") != NULL);
    free(all);
    close(sv[1]);
    coll_boot_close(b);
    return 0;
  }
  /* mode 3: rank 0 gathers; peer r sent the r-th piece */
  int fds[9], ends[9];
  size_t each = size / (size_t)(n - 1), off = 0;
  fds[0] = ends[0] = -1;
  for (int r = 1; r < n; r++) {
    size_t len = r == n - 1 ? size - off : each;
    if (feed(sv, data + off, len) != 0) {
      for (int q = 1; q < r; q++) close(fds[q]), close(ends[q]);
      return 0;
    }
    fds[r] = sv[0];
    ends[r] = sv[1];
    off += len;
  }
  if (coll_boot_from_fds(&b, 0, n, fds, 2000, &e) != 0) {
    for (int r = 1; r < n; r++) close(fds[r]), close(ends[r]);
    return 0;
  }
  size_t bytes = 1 + size % 16;
  uint8_t mine[16], *all = malloc(bytes * (size_t)n);
  memset(mine, 3, sizeof mine);
  if (all) {
    int rc = coll_boot_allgather(b, all, mine, bytes, &e);
    FUZZ_SAY(rc, e.msg);
    if (rc == 0)
      FUZZ_CHECK(memcmp(all, mine, bytes) == 0);
    else
      FUZZ_CHECK(strstr(e.msg, "rank 0 (host0)") != NULL);
  }
  free(all);
  for (int r = 1; r < n; r++) close(ends[r]);
  coll_boot_close(b);
  return 0;
}
