/* The part of DPDK's API that bindgen cannot bind: macros and thread-locals. */
#ifndef ROCESW_DPDK_SHIM_H
#define ROCESW_DPDK_SHIM_H

/* rte_errno is a per-lcore (thread-local) variable behind a macro; reading it as a plain
 * static would read the wrong thread's copy or a symbol that does not exist. */
int rocesw_rte_errno(void);

/* The plugin directory this DPDK loads its drivers (PMDs) from, for error messages. */
const char *rocesw_rte_pmd_path(void);

#endif
