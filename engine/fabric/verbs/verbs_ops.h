// The one table through which the verbs provider reaches libibverbs.
// Production fills it from libibverbs (realVerbsOps()); unit tests fill it with
// fakes, so QP state transitions, WR building and completion handling are tested
// without a NIC. The signatures are libibverbs' own (the static inlines and
// macros of verbs.h - ibv_post_send, ibv_poll_cq, ibv_query_port, ibv_reg_mr,
// ibv_query_gid_ex - are wrapped as plain functions).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fabric/fabric.h"

namespace tent::config {
struct VerbsFabricConfig;
}

namespace tent::fabric {

struct VerbsOps {
  ibv_device** (*get_device_list)(int* num_devices);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_port)(ibv_context* context, uint8_t port_num, ibv_port_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid);
  // Gives the GID type (IB / RoCE v1 / RoCE v2); ENODATA for an empty entry.
  int (*query_gid_ex)(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  // A dma-buf (GPU memory exported by its driver); nullptr when libibverbs lacks it.
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector);
  int (*destroy_cq)(ibv_cq* cq);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*destroy_qp)(ibv_qp* qp);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
  // Hot path.
  int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
  int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
  int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc);

  // Async events (control path). The provider makes the context's async_fd
  // non-blocking, so get_async_event returns -1 with errno EAGAIN when none waits.
  // nullptr (a table without them): the device reports no events.
  int (*get_async_event)(ibv_context* context, ibv_async_event* event);
  void (*ack_async_event)(ibv_async_event* event);

  // ---- the host's network interfaces (not libibverbs; faked beside it) -------
  // A RoCE GID sits on a netdev (ibv_gid_entry.ndev_ifindex): its name (NUL-terminated,
  // at most IF_NAMESIZE bytes) and whether it is up. 0, or an errno (ENODEV: no such
  // interface).
  int (*query_netdev)(uint32_t ifindex, char* name, size_t name_len, bool* up);
  // The interface of the IPv4 default route: 0 with its name, or ENOENT without one.
  int (*default_route_netdev)(char* name, size_t name_len);
};

// The table filled from libibverbs.
const VerbsOps& realVerbsOps() noexcept;

// Test hook: a table fabric::createProvider() takes instead of realVerbsOps(), for
// provider verbs and for auto's device count, so an engine built from YAML runs on
// a fake libibverbs (tests/fabric_verbs/loopback_verbs.h). nullptr restores the
// real table. Production never sets it. Set it before creating providers; `ops`
// must outlive every provider created from it.
void setVerbsOpsOverride(const VerbsOps* ops) noexcept;
// The override when one is set, otherwise realVerbsOps().
const VerbsOps& activeVerbsOps() noexcept;

// The factories of verbs_provider.h over a given table (tests pass fakes).
// `ops` must outlive the provider and everything it creates.
size_t verbsDeviceCount(const VerbsOps& ops) noexcept;
Result<std::unique_ptr<Provider>> createVerbsProvider(const config::VerbsFabricConfig& config,
                                                      const VerbsOps& ops);

}  // namespace tent::fabric
