/*
 * A stand-in NVTX tool, loaded by NVTX itself through
 * NVTX_INJECTION64_PATH as Nsight Systems' would be: it takes the domain
 * calls (create, range push and pop) and records them, and the test reads
 * them back with nvtx_inject_log.
 */
#include <stdio.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

#define EXPORT __attribute__((visibility("default")))

static char log_text[8192];
static size_t log_len;
static int depth;

static void note(const char *s) {
  size_t n = strlen(s);
  if (log_len + n + 2 >= sizeof log_text) return;
  memcpy(log_text + log_len, s, n);
  log_len += n;
  log_text[log_len++] = '\n';
  log_text[log_len] = '\0';
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name) {
  char line[160];
  snprintf(line, sizeof line, "domain %s", name);
  note(line);
  return (nvtxDomainHandle_t)(void *)0x1;
}

static void NVTX_API domain_destroy(nvtxDomainHandle_t d) {
  (void)d;
  note("destroy");
}

static int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a) {
  char line[160];
  snprintf(line, sizeof line, "push%s %s", d == (nvtxDomainHandle_t)(void *)0x1 ? "" : "?",
           a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : "?");
  note(line);
  return ++depth;
}

static int NVTX_API range_pop(nvtxDomainHandle_t d) {
  (void)d;
  note("pop");
  return depth--;
}

EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
  if (cb == NULL) return 0;
  NvtxFunctionTable table = NULL;
  unsigned int size = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) || table == NULL) return 0;
  if (size > NVTX_CBID_CORE2_DomainCreateA)
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
  if (size > NVTX_CBID_CORE2_DomainDestroy)
    *table[NVTX_CBID_CORE2_DomainDestroy] = (NvtxFunctionPointer)domain_destroy;
  if (size > NVTX_CBID_CORE2_DomainRangePushEx)
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)range_push;
  if (size > NVTX_CBID_CORE2_DomainRangePop)
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
  return 1;
}

EXPORT const char *nvtx_inject_log(void) { return log_text; }
