// A fake libibverbs behind the VerbsOps table: hand-written, single-threaded,
// recording every call the provider makes, with switches to make calls fail.
#pragma once

#include <infiniband/verbs.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fabric/verbs/verbs_ops.h"

namespace tent::fabric::testing {

struct FakeVerbs {
  struct ModifyCall {
    uint32_t qp_num = 0;
    ibv_qp_attr attr{};
    int mask = 0;
  };
  struct PostedWr {
    uint32_t qp_num = 0;
    uint64_t wr_id = 0;  // the ibv wr_id the provider chose
    ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
    unsigned int send_flags = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    std::vector<ibv_sge> sges;
  };

  FakeVerbs();
  ~FakeVerbs();

  // ---- what the fake machine has -------------------------------------------
  // What rdma-core reports for each kind (node and transport type; link layer of
  // the port: IB or Ethernet; EFA unspecified).
  enum class Kind { kInfiniband, kRoce, kEfa, kIwarp };
  void addDevice(const std::string& name, Kind kind = Kind::kRoce);
  // Per device: its port's attributes (state, link layer) differ from port_attr.
  std::map<std::string, ibv_port_attr> port_attr_of;
  std::map<std::string, int> fail_open_of;  // device name -> errno of open_device
  // "::ffff:10.0.0.1" / "fe80::1", on the netdev named `netdev` (created up when new;
  // "" leaves the entry without one, as IB GIDs are).
  void setGid(int index, ibv_gid_type type, const std::string& text,
              const std::string& netdev = "eth0");
  // The host's netdevs by ifindex (query_netdev), and the default route's interface
  // ("": none, default_route_netdev says ENOENT).
  struct Netdev {
    std::string name;
    bool up = true;
  };
  std::map<uint32_t, Netdev> netdevs;
  std::string default_route;
  uint32_t netdevIndex(const std::string& name);  // creates it (up) when new
  std::vector<std::unique_ptr<ibv_device>> devices;
  bool list_returns_null = false;
  ibv_device_attr device_attr{};
  ibv_port_attr port_attr{};
  std::map<int, ibv_gid_entry> gids;  // missing index: ENODATA
  int query_gid_ex_rc = 0;            // forced result, e.g. EOPNOTSUPP

  // ---- failure switches ------------------------------------------------------
  bool fail_open = false;
  bool fail_reg_mr = false;
  bool reject_relaxed_ordering = false;  // reg_mr with IBV_ACCESS_RELAXED_ORDERING: EINVAL
  int fail_reg_dmabuf_mr = 0;            // errno returned by reg_dmabuf_mr (0: succeeds)
  bool fail_create_qp = false;
  std::map<ibv_qp_state, int> modify_rc;  // target state -> errno returned
  long fail_post_at = -1;                 // global WR number (over all posts) that fails
  int fail_post_rc = ENOMEM;
  int poll_rc = 0;  // < 0: poll_cq returns it
  // Runs inside poll_cq after it took its CQEs, before it returns them (once; cleared
  // before the call): a test interleaves a second poller or a post there.
  std::function<void()> inside_poll;

  // ---- records -----------------------------------------------------------------
  std::vector<ModifyCall> modifies;
  std::vector<PostedWr> posted;
  std::vector<int> post_call_sizes;
  std::vector<ibv_qp_init_attr> qp_inits;
  std::vector<int> reg_access;
  struct DmabufReg {
    uint64_t offset = 0;
    size_t length = 0;
    uint64_t iova = 0;
    int fd = -1;
    int access = 0;
  };
  std::vector<DmabufReg> dmabuf_regs;
  std::vector<void*> reg_addrs;  // reg_mr's addresses
  int opened = 0, closed = 0, pds = 0, mrs = 0, cqs = 0, qps = 0;

  // ---- completions ---------------------------------------------------------------
  // Queues a CQE for posted WR number `index` (position in `posted`).
  void complete(size_t index, ibv_wc_status status = IBV_WC_SUCCESS, uint32_t vendor_err = 0);
  // Queues a CQE for every signaled WR not completed yet, in order.
  void completeAllSignaled(ibv_wc_status status = IBV_WC_SUCCESS);
  std::deque<ibv_wc> cq_entries;
  size_t next_signaled = 0;

  std::vector<std::unique_ptr<ibv_context>> contexts;
  std::vector<std::unique_ptr<ibv_pd>> pd_objects;
  std::vector<std::unique_ptr<ibv_mr>> mr_objects;
  std::vector<std::unique_ptr<ibv_cq>> cq_objects;
  std::vector<std::unique_ptr<ibv_qp>> qp_objects;
  uint32_t next_qp_num = 100;
  uint32_t next_key = 0x1000;
};

// The table whose functions act on the current FakeVerbs (one at a time).
const VerbsOps& fakeOps();
FakeVerbs* currentFake();

}  // namespace tent::fabric::testing
