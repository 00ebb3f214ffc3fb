/* What the bindings are generated from: the DPDK headers the safe wrapper (crate rocesw-dpdk)
 * uses, and the shim's own declarations. rte_config.h first, as pkg-config's `-include` would. */
#include <rte_config.h>
#include <rte_errno.h>
#include <rte_eal.h>
#include <rte_lcore.h>
#include <rte_dev.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_ethdev.h>

#include "shim.h"
