/* libefa.so.1 for xwarp: perftest links these; xwarp's device is no EFA device, so each
   answers "not supported". */
#include <errno.h>
#include <stddef.h>

void *efadv_create_qp_ex(void *context, void *attr_ex, void *efa_attr, unsigned int inlen)
{
	(void)context; (void)attr_ex; (void)efa_attr; (void)inlen;
	errno = EOPNOTSUPP;
	return NULL;
}

int efadv_query_device(void *context, void *attr, unsigned int inlen)
{
	(void)context; (void)attr; (void)inlen;
	return EOPNOTSUPP;
}
