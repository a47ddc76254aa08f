/*
 * NVTX ranges (base.h): a domain of the engine's own, made when
 * JITK_NVTX=1 at its creation. NVTX 3 is header-only: without a tool
 * attached (Nsight Systems sets NVTX_INJECTION64_PATH) its calls return at
 * once. Its dispatch table is NVTX's, shared by the process as NVTX
 * requires; jitk keeps nothing of its own outside the engine.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#include "base/base.h"

void jk_trace_init(jitk_engine *e) {
  const char *v = getenv("JITK_NVTX");
  jk_base_of(e)->trace_domain =
      v != NULL && strcmp(v, "1") == 0 ? (void *)nvtxDomainCreateA("jitk") : NULL;
}

void jk_trace_fini(jitk_engine *e) {
  if (jk_base_of(e)->trace_domain != NULL)
    nvtxDomainDestroy((nvtxDomainHandle_t)jk_base_of(e)->trace_domain);
  jk_base_of(e)->trace_domain = NULL;
}

void jk_trace_push_(const jitk_engine *e, const char *fmt, ...) {
  char name[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  nvtxEventAttributes_t a;
  memset(&a, 0, sizeof a);
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name;
  nvtxDomainRangePushEx((nvtxDomainHandle_t)jk_base_of(e)->trace_domain, &a);
}

void jk_trace_pop_(const jitk_engine *e) {
  nvtxDomainRangePop((nvtxDomainHandle_t)jk_base_of(e)->trace_domain);
}
