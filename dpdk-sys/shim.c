/* See shim.h. Compiled by build.rs with the same flags as the bindings. */
#include <rte_config.h>
#include <rte_errno.h>

#include "shim.h"

int rocesw_rte_errno(void)
{
	return rte_errno;
}

const char *rocesw_rte_pmd_path(void)
{
#ifdef RTE_EAL_PMD_PATH
	return RTE_EAL_PMD_PATH;
#else
	return "";
#endif
}
