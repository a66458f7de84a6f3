/* The GPU communicators' fabric: what NCCL would choose to carry the data, from the topology. */
#include <stdlib.h>
#include <string.h>

#include "collbench_int.h"
#include "topo.h"

/* What carries a GPU communicator's data, as NCCL would choose it from the path between the
 * GPUs (rank 0's topology; NCCL's own choice is in its NCCL_DEBUG=INFO log): NVLink, PCIe
 * peer-to-peer up to a host bridge, shared memory across host bridges or sockets, and between
 * hosts InfiniBand/RoCE when this host has it, else sockets. Ranks sharing one GPU: CUDA IPC
 * (path X). The widest path class between neighbouring ranks' GPUs follows a slash
 * ("nccl:pcie/PXB"); none between hosts. */
void cb_gpu_fabric(coll_comm *c, char *fabric, size_t fcap) {
  char path[16];
  size_t pcap = sizeof path;
  static const char *const order[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"};
  const char *base = coll_comm_fabric(c);
  int n = coll_comm_size(c), worst = -1, hosts_apart = 0;
  char err[256], cls[16];
  topo_info *ti = NULL;
  path[0] = '\0';
  snprintf(fabric, fcap, "%s", base);
  if (topo_load(&ti, NULL, err, sizeof err) != 0) return;
  for (int r = 0; r < n; r++) {
    int q = (r + 1) % n;
    if (strcmp(coll_comm_host(c, r), coll_comm_host(c, q))) {
      hosts_apart = 1;
      continue;
    }
    if (topo_gpu_path(ti, coll_comm_gpu(c, r), coll_comm_gpu(c, q), cls, sizeof cls)) continue;
    for (int i = 0; i < 7; i++)
      if (!strncmp(cls, order[i], strlen(order[i])) && i > worst) {
        snprintf(path, pcap, "%s", cls);
        worst = i;
      }
  }
  const char *p2p_off = getenv("NCCL_P2P_DISABLE"), *ib_off = getenv("NCCL_IB_DISABLE");
  if (!strncmp(base, "nccl:", 5) && n > 1) {
    const char *what = hosts_apart ? (topo_has_ib(ti) && !(ib_off && atoi(ib_off)) ? "ib" : "socket")
                       : worst == 1 && !(p2p_off && atoi(p2p_off)) ? "nvlink"
                       : worst >= 2 && worst <= 4 && !(p2p_off && atoi(p2p_off)) ? "pcie"
                       : worst >= 0 ? "shm" : "p2p";
    snprintf(fabric, fcap, "nccl:%s", what);
  }
  if (path[0]) snprintf(fabric + strlen(fabric), fcap - strlen(fabric), "/%s", path);
  topo_free(ti);
}

